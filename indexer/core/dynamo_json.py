"""DynamoDB JSON (``{"S": ...}``, ``{"N": "12"}`` ...) to plain Python values.

Numbers are converted deliberately: integral values become ``int`` (timestamps, counts), the
rest ``Decimal`` — never ``float``, which would silently round (data-prepper #3840). Strings
must be valid Unicode scalar values: DynamoDB stores UTF-8, so a lone surrogate can only come
from a corrupted or forged record.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from indexer.core.errors import RecordError

Value = Any  # str | int | Decimal | bool | bytes | None | list[Value] | dict[str, Value] | set


def _string(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise RecordError(f"{where}: expected a string, got {type(raw).__name__}")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RecordError(f"{where}: invalid Unicode (lone surrogate at {exc.start})") from exc
    return raw


def _number(raw: object, where: str) -> int | Decimal:
    text = _string(raw, where)
    try:
        number = Decimal(text)
    except InvalidOperation as exc:
        raise RecordError(f"{where}: {text[:40]!r} is not a number") from exc
    if not number.is_finite():
        raise RecordError(f"{where}: {text[:40]!r} is not a finite number")
    if number == number.to_integral_value():
        return int(number)
    return number


def _binary(raw: object, where: str) -> bytes:
    try:
        return base64.b64decode(_string(raw, where), validate=True)
    except binascii.Error as exc:
        raise RecordError(f"{where}: invalid base64") from exc


def decode_value(attr: object, where: str = "value") -> Value:
    """One typed attribute value to Python; raises :class:`RecordError` on anything malformed."""
    if not isinstance(attr, Mapping) or len(attr) != 1:
        raise RecordError(f"{where}: expected a one-key DynamoDB type object")
    ((tag, raw),) = attr.items()
    if tag == "S":
        return _string(raw, where)
    if tag == "N":
        return _number(raw, where)
    if tag == "BOOL":
        if not isinstance(raw, bool):
            raise RecordError(f"{where}: BOOL must be true or false")
        return raw
    if tag == "NULL":
        return None
    if tag == "B":
        return _binary(raw, where)
    if tag in ("L", "SS", "NS", "BS") and not isinstance(raw, list):
        raise RecordError(f"{where}: {tag} must be a list")
    if tag == "L":
        return [decode_value(v, f"{where}[{i}]") for i, v in enumerate(raw)]
    if tag == "SS":
        return {_string(v, where) for v in raw}
    if tag == "NS":
        return {_number(v, where) for v in raw}
    if tag == "BS":
        return {_binary(v, where) for v in raw}
    if tag == "M":
        return decode_item(raw, where)
    raise RecordError(f"{where}: unknown DynamoDB type {str(tag)[:20]!r}")


def decode_item(image: object, where: str = "item") -> dict[str, Value]:
    """A whole item (attribute name → typed value). Unknown attributes are kept, not rejected."""
    if not isinstance(image, Mapping):
        raise RecordError(f"{where}: expected an object of attributes")
    return {
        _string(name, where): decode_value(value, f"{where}.{name}")
        for name, value in image.items()
    }
