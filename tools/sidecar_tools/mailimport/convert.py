"""One RFC 5322 message (bytes) → an AECS-1 ``NormalizedEmail`` dict (pure: no I/O, no clock).

Parsing is Python's ``email`` package with ``policy.default``; what it tolerates (missing
boundaries, bad base64, unknown charsets, 8-bit header bytes) is imported with what can be read,
and only a message with nothing to store raises :class:`MalformedMessage`.

Identity (AECS-1 §4.1.1, §5, as the shipped corpora): ``messageId`` is the Message-ID without
its angle brackets; a message without one gets ``<sha256 of its bytes>@import.invalid``, so a
re-import finds it again. ``threadId`` is the first References entry, else In-Reply-To, else the
message's own id. ``rawFull``/``raw``/``html`` stay null: the importer keeps no cold tier, and
attachments are counted and described, their bytes never kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from sidecar_tools.mailimport.text import FORAI_MAX_CHARS, clean_text, for_ai, html_to_text

SPEC_VERSION = "1.0"
_SURROGATE = re.compile("[\udc80-\udcff]")
_ID = re.compile(r"<([^<>\s]+)>")
_MAX_ID_CHARS = 998  # RFC 5322 line limit; longer ids are hashed


class MalformedMessage(ValueError):
    """Nothing of this message can be stored; the text says why."""


def _readable(value: object) -> str:
    """Text with undecodable 8-bit bytes (surrogate escapes) read as UTF-8 where they form
    UTF-8, else one byte at a time as Windows-1252 (the usual raw 8-bit header charsets)."""
    text = str(value)
    if not _SURROGATE.search(text):
        return text
    mixed = text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
    return _SURROGATE.sub(lambda m: bytes([ord(m.group()) - 0xDC00]).decode("cp1252", "replace"),
                          mixed)


def _raw_header(msg: Message, name: str) -> str | None:
    """The header's source text (8-bit bytes kept as surrogate escapes), unparsed."""
    for key, value in msg.raw_items():
        if key.lower() == name:
            return str(value)
    return None


def _header(msg: Message, name: str) -> str | None:
    """One header's text (RFC 2047 decoded), or None when absent; raw 8-bit bytes decoded
    by :func:`_readable` rather than replaced (the parser's default)."""
    raw = _raw_header(msg, name)
    if raw is None:
        return None
    if _SURROGATE.search(raw):
        text = _decoded_words(_readable(raw))
    else:
        try:
            text = str(msg.get(name))
        except (ValueError, TypeError, IndexError, AttributeError, LookupError):
            text = raw
    return " ".join(_readable(text).split()) or None


def _ids(value: str | None) -> list[str]:
    found = _ID.findall(value or "")
    if not found and value and " " not in value.strip():
        found = [value.strip()]
    return [i for i in found if len(i) <= _MAX_ID_CHARS]


def _first_id(value: str | None) -> str | None:
    found = _ids(value)
    return found[0] if found else None


def _decoded_words(text: str) -> str:
    """RFC 2047 encoded words decoded (display names of raw address headers)."""
    if "=?" not in text:
        return text
    try:
        return str(make_header(decode_header(text)))
    except (ValueError, LookupError, UnicodeError):
        return text


def _addresses(msg: Message, name: str) -> list[dict[str, str | None]]:
    """Addresses of one header; a group or an unparseable entry yields what it can."""
    raw = [v for k, v in msg.raw_items() if k.lower() == name]
    try:
        pairs = getaddresses([_decoded_words(_readable(v)) for v in raw])
    except (ValueError, TypeError, IndexError):
        return []
    out = []
    for display, email in pairs:
        email = email.strip()
        if email:
            out.append({"name": display.strip() or None, "email": email or None})
    return out


def _date(msg: Message) -> tuple[str | None, int | None]:
    raw = _header(msg, "date")
    if raw is None:
        return None, None
    try:
        parsed = parsedate_to_datetime(raw)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None, None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)  # "-0000" (RFC 5322 3.3): UTC, local zone unknown
    try:
        ts = int(parsed.timestamp())
        iso = parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None, None
    return (iso, ts) if 0 <= ts < 10**12 else (None, None)


def _decoded_text(part: Message) -> str:
    """A text part's content; an unknown charset or bad transfer encoding reads as UTF-8."""
    try:
        content = part.get_content() if isinstance(part, EmailMessage) else None
        if isinstance(content, str):
            return _readable(content)
    except (LookupError, ValueError, AssertionError, KeyError, AttributeError):
        pass
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return payload.decode("utf-8", "replace")
    return _readable(part.get_payload() or "")


def _size(part: Message) -> int:
    payload = part.get_payload(decode=True)
    if isinstance(payload, bytes):
        return len(payload)
    inner = part.get_payload()
    if isinstance(inner, list):
        return sum(len(m.as_bytes()) for m in inner if isinstance(m, Message))
    return len(str(inner or "").encode("utf-8", "surrogateescape"))


def _walk(msg: Message) -> Iterator[tuple[Message, bool]]:
    """(part, is_attachment) for every leaf; a nested ``message/rfc822`` is one attachment."""
    if msg.get_content_maintype() == "message":
        yield msg, True
        return
    if msg.is_multipart():
        payload = msg.get_payload()
        for sub in payload if isinstance(payload, list) else []:
            if isinstance(sub, Message):
                yield from _walk(sub)
        return
    disposition = (msg.get_content_disposition() or "").lower()
    named = msg.get_filename() is not None
    # a multipart whose boundary is missing is left as one text payload: read it as text
    text = msg.get_content_maintype() in ("text", "multipart")
    yield msg, disposition == "attachment" or (named and not text) or not text


def _body(msg: Message, message_id: str) -> tuple[str | None, str | None, list[dict[str, Any]]]:
    """(plain text, html, attachments) of the message's MIME tree."""
    plain: list[str] = []
    html: list[str] = []
    attachments: list[dict[str, Any]] = []
    top = [msg] if msg.get_content_maintype() == "message" else []
    for part, is_attachment in _walk(msg) if not top else ((m, True) for m in top):
        if is_attachment:
            attachments.append({
                "id": f"{message_id}:{len(attachments)}",
                "filename": _readable(part.get_filename()) if part.get_filename() else None,
                "contentType": part.get_content_type(),
                "size": _size(part),
                "cid": _first_id(_header(part, "content-id")),
            })
        elif part.get_content_subtype() == "html":
            html.append(_decoded_text(part))
        else:
            plain.append(_decoded_text(part))
    text = "\n\n".join(p.replace("\r\n", "\n").strip("\n") for p in plain if p.strip()) or None
    html_text = "\n".join(html) or None
    return text, html_text, attachments


def to_normalized(raw: bytes, processed_at: str) -> dict[str, Any]:
    """The ``NormalizedEmail`` of ``raw``; raises :class:`MalformedMessage` naming the reason."""
    if not raw.strip():
        raise MalformedMessage("empty file")
    try:
        msg = BytesParser(policy=policy.default).parsebytes(raw)
    except Exception as err:  # the parser is lenient; anything it still raises is a bad message
        raise MalformedMessage(f"not parseable as RFC 5322: {type(err).__name__}: {err}") from None
    if not msg.keys():
        raise MalformedMessage("no header fields (not an RFC 5322 message)")
    try:
        return _normalized(msg, raw, processed_at)
    except RecursionError:
        raise MalformedMessage("MIME nesting too deep") from None


def _normalized(msg: EmailMessage, raw: bytes, processed_at: str) -> dict[str, Any]:
    own = _ids(_header(msg, "message-id"))
    message_id = own[0] if own else f"{hashlib.sha256(raw).hexdigest()}@import.invalid"
    references = _ids(_header(msg, "references"))
    in_reply_to = _first_id(_header(msg, "in-reply-to"))
    thread_id = references[0] if references else in_reply_to or message_id
    date, ts = _date(msg)
    text, html, attachments = _body(msg, message_id)
    if text is None and html is not None:
        text = html_to_text(html) or None
    clean, fallback = clean_text(text) if text else (None, False)
    sender = (_addresses(msg, "from") or [{"name": None, "email": None}])[0]
    return {
        "messageId": message_id,
        "threadId": thread_id,
        "metadata": {
            "from": sender,
            "to": _addresses(msg, "to"),
            "cc": _addresses(msg, "cc"),
            "bcc": _addresses(msg, "bcc"),
            "subject": _header(msg, "subject"),
            "date": date,
            "timestamp": ts,
        },
        "content": {
            "rawFull": None, "raw": None, "html": None, "text": text, "clean": clean,
            "forAI": for_ai(clean, FORAI_MAX_CHARS) if clean else None,
        },
        "thread": {"position": None, "inReplyTo": in_reply_to, "references": references},
        "attachments": attachments,
        "processing": {
            "processedAt": processed_at, "specVersion": SPEC_VERSION, "cleanFallback": fallback,
        },
    }

