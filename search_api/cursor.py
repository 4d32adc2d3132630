"""Opaque, stable page cursors.

A cursor carries the position (OpenSearch ``search_after`` values, or an offset inside a
bounded candidate list) and a fingerprint of the request it belongs to, so a cursor replayed
against another mailbox, query or mode is rejected instead of silently paging something else.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any


class CursorError(ValueError):
    """A cursor that is malformed or belongs to another request."""


def fingerprint(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def encode(request: str, position: dict[str, Any]) -> str:
    raw = json.dumps({"r": request, **position}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str, request: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise CursorError("cursor is not valid") from exc
    if not isinstance(data, dict) or data.pop("r", None) != request:
        raise CursorError("cursor does not belong to this search")
    return data
