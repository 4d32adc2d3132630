"""Read and check the fields of one AECS-1 ``NormalizedEmail`` (pure, no boto3).

Each helper takes a raw JSON value and the path it came from, and returns it typed or raises
:class:`InvalidEmail` naming that path; :mod:`sidecar_tools.writer.mapping` builds the store items
from what they return.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

_MAX_TS = 10**12 - 1  # ts12 must stay 12 digits for string order to match time order.
ROLES = ("from", "to", "cc", "bcc")


class InvalidEmail(ValueError):
    """The input cannot be stored; the message says which field and why."""


def validate_mailbox_id(mailbox_id: object) -> str:
    """The mailbox id goes raw into keys, so ``#`` (the separator) and control chars are refused."""
    if not isinstance(mailbox_id, str) or not mailbox_id:
        raise InvalidEmail("mailbox id must be a non-empty string")
    if "#" in mailbox_id:
        raise InvalidEmail("mailbox id must not contain '#'")
    if not mailbox_id.isprintable():
        raise InvalidEmail("mailbox id must contain printable characters only")
    return mailbox_id


def as_object(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidEmail(f"{where} must be an object")
    return value


def opt_str(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidEmail(f"{where} must be a string or null")


def as_list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidEmail(f"{where} must be a list")
    return value


def parse_iso(value: str, where: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidEmail(f"{where} is not an ISO-8601 date: {value[:40]!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def sort_ts(metadata: Mapping[str, Any], processed_at: str | None) -> int:
    """``metadata.timestamp``, else ``processedAt`` in epoch seconds (Appendix C.2)."""
    raw = metadata.get("timestamp")
    if isinstance(raw, bool) or not (raw is None or isinstance(raw, int | float)):
        raise InvalidEmail("metadata.timestamp must be a number or null")
    if raw is None:
        if processed_at is None:
            raise InvalidEmail("no metadata.timestamp and no processing.processedAt to sort by")
        raw = parse_iso(processed_at, "processing.processedAt").timestamp()
    if raw != raw or not 0 <= raw <= _MAX_TS:  # NaN or outside what ts12 can hold
        raise InvalidEmail(f"timestamp {raw!r} is outside 0..{_MAX_TS}")
    return int(raw)


def addresses(metadata: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """(role, lowercased email, name) per from/to/cc/bcc entry; unique per (email, role)."""
    found: list[tuple[str, str, str | None]] = []
    seen: set[tuple[str, str]] = set()
    for role in ROLES:
        raw = metadata.get(role)
        entries = [raw] if role == "from" else as_list(raw, f"metadata.{role}")
        for i, entry in enumerate(entries):
            where = f"metadata.{role}" + ("" if role == "from" else f"[{i}]")
            addr = as_object(entry, where)
            email = (opt_str(addr.get("email"), f"{where}.email") or "").strip().lower()
            name = opt_str(addr.get("name"), f"{where}.name")
            if email and (email, role) not in seen:
                seen.add((email, role))
                found.append((role, email, name))
    return found


def x_fields(email: Mapping[str, Any]) -> str | None:
    """Top-level extension fields (``x_*`` as in to-rows.mjs, or ``x-*``) as sorted JSON."""
    extra = {k: v for k, v in email.items() if k[:2].lower() in ("x_", "x-")}
    if not extra:
        return None
    try:
        return json.dumps(extra, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise InvalidEmail(f"extension fields are not JSON: {err}") from None


def email_ids(email: object) -> tuple[Mapping[str, Any], str, str]:
    if not isinstance(email, Mapping):
        raise InvalidEmail("a NormalizedEmail must be a JSON object")
    ids = []
    for field in ("messageId", "threadId"):
        value = email.get(field)
        if not isinstance(value, str) or not value:
            raise InvalidEmail(f"{field} is required and must be a non-empty string")
        ids.append(value)
    return email, ids[0], ids[1]
