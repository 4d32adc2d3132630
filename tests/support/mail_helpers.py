"""Real mail back as RFC 5322 files: the shipped NormalizedEmail corpora written as a Maildir/mbox.

The corpora keep no ``rawFull``, so each message is rebuilt from its fields with the standard
library (headers, the text body, its attachments as parts of the recorded size) — the importer
then has to find every field again from the bytes alone.
"""

from __future__ import annotations

import gzip
import json
import mailbox
from datetime import UTC, datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any


def corpus(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _address(entry: dict[str, Any]) -> str:
    email = entry.get("email") or ""
    if "@" not in email:
        return email
    local, domain = email.rsplit("@", 1)
    try:
        return str(Address(entry.get("name") or "", local, domain))
    except (ValueError, IndexError):
        return email


def to_message(email: dict[str, Any]) -> EmailMessage:
    """An RFC 5322 message carrying the NormalizedEmail's headers, text and attachments."""
    msg = EmailMessage(policy=policy.SMTPUTF8)
    meta, thread = email["metadata"], email["thread"]
    if (meta.get("from") or {}).get("email"):
        msg["From"] = _address(meta["from"])
    for role in ("to", "cc"):
        if meta.get(role):
            msg[role.capitalize()] = ", ".join(_address(a) for a in meta[role])
    if meta.get("subject") is not None:
        msg["Subject"] = meta["subject"]
    if meta.get("timestamp") is not None:
        msg["Date"] = format_datetime(datetime.fromtimestamp(meta["timestamp"], UTC))
    msg["Message-ID"] = f"<{email['messageId']}>"
    if thread.get("inReplyTo"):
        msg["In-Reply-To"] = f"<{thread['inReplyTo']}>"
    if thread.get("references"):
        msg["References"] = " ".join(f"<{r}>" for r in thread["references"])
    msg.set_content(email["content"].get("text") or "")
    for att in email.get("attachments") or []:
        maintype, _, subtype = (att.get("contentType") or "application/octet-stream").partition("/")
        msg.add_attachment(
            b"\0" * int(att.get("size") or 0), maintype=maintype, subtype=subtype or "octet-stream",
            filename=att.get("filename") or "unnamed",
        )
    return msg


def write_maildir(emails: list[dict[str, Any]], root: Path) -> Path:
    """``root`` as a Maildir: half the messages in ``new/``, half in ``cur/`` (seen)."""
    box = mailbox.Maildir(root, create=True)
    for n, email in enumerate(emails):
        message = mailbox.MaildirMessage(to_message(email))
        if n % 2:
            message.set_subdir("cur")
            message.add_flag("S")
        box.add(message)
    return root


def write_mbox(emails: list[dict[str, Any]], path: Path) -> Path:
    box = mailbox.mbox(path, create=True)
    box.lock()
    try:
        for email in emails:
            box.add(to_message(email))
    finally:
        box.flush()
        box.unlock()
    return path
