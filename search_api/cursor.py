"""Opaque, stable, authenticated page cursors.

A cursor carries the position (OpenSearch ``search_after`` values, or an offset inside a
bounded candidate list) and the request it belongs to, so a cursor replayed against another
mailbox, query or mode is rejected instead of silently paging something else.

Cursors are signed: ``base64url(json) "." base64url(HMAC-SHA256(key, json))``, with the key
every API replica shares (``SIDECAR_CURSOR_KEY``; a random per-process key when unset, so a
cursor then only works on the replica that issued it and not after a restart). A cursor that
fails the MAC, or whose position is not exactly the shape its page needs, is a
:class:`CursorError` (400): nothing a client sends as a cursor ever reaches the engine
unchecked.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import secrets
from typing import Any

MAX_CURSOR_LENGTH = 2048
MAX_RANK = 10**9  # hits before a search_after page (for rank-derived scores)
MAX_OFFSET = 10_000  # OpenSearch's max_result_window; offsets of deeper pages are refused
_KEY = re.compile(r"[0-9a-f]{64}")


class CursorError(ValueError):
    """A cursor that is malformed, forged, or belongs to another request."""


def fingerprint(*parts: object) -> str:
    """The request a cursor belongs to (mailbox, query, mode, collapse, sort)."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Signs and checks cursors with one key (``None``: a random key for this process)."""

    def __init__(self, key: str | None) -> None:
        self._key = key.encode() if key else secrets.token_bytes(32)

    def _mac(self, raw: bytes) -> bytes:
        return hmac.new(self._key, raw, hashlib.sha256).digest()

    def encode(self, request: str, position: dict[str, Any]) -> str:
        raw = json.dumps({"r": request, **position}, separators=(",", ":")).encode()
        return f"{_b64(raw)}.{_b64(self._mac(raw))}"

    def decode(self, cursor: str, request: str, *, sort_keys: int | None) -> dict[str, Any]:
        """The position of a cursor this codec issued for ``request``. ``sort_keys``: the
        number of ``search_after`` values the page needs, or None for an offset page."""
        raw = self._authentic(cursor)
        try:
            data = json.loads(raw, parse_constant=_no_constant)
        except ValueError as exc:
            raise CursorError("cursor is not valid") from exc
        if not isinstance(data, dict) or data.pop("r", None) != request:
            raise CursorError("cursor does not belong to this search")
        return _search_after(data, sort_keys) if sort_keys is not None else _offset(data)

    def _authentic(self, cursor: str) -> bytes:
        body, dot, mac = cursor.partition(".")
        if not dot or len(cursor) > MAX_CURSOR_LENGTH:
            raise CursorError("cursor is not valid")
        try:
            raw, given = _unb64(body), _unb64(mac)
        except (binascii.Error, ValueError) as exc:
            raise CursorError("cursor is not valid") from exc
        if not hmac.compare_digest(given, self._mac(raw)):
            raise CursorError("cursor is not valid (not issued by this service, or expired)")
        return raw


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _search_after(data: dict[str, Any], sort_keys: int) -> dict[str, Any]:
    values, rank = data.get("a"), data.get("n")
    if set(data) != {"a", "n"} or not isinstance(values, list) or len(values) != sort_keys:
        raise CursorError("cursor does not fit this search")
    if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank <= MAX_RANK:
        raise CursorError("cursor does not fit this search")
    *numbers, last = values
    if not all(_is_number(v) for v in numbers) or not _is_key(last):
        raise CursorError("cursor does not fit this search")
    return {"a": values, "n": rank}


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and -(2**63) <= value < 2**63  # a long sort value (Long.MIN_VALUE for missing)
    )


def _is_key(value: Any) -> bool:
    return isinstance(value, str) and _KEY.fullmatch(value) is not None


def _offset(data: dict[str, Any]) -> dict[str, Any]:
    offset = data.get("o")
    if set(data) != {"o"} or not isinstance(offset, int) or isinstance(offset, bool):
        raise CursorError("cursor does not fit this search")
    if not 0 < offset <= MAX_OFFSET:
        raise CursorError(f"cursor offset must be between 1 and {MAX_OFFSET}")
    return {"o": offset}
