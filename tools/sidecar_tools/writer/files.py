"""Read NormalizedEmail files (JSON lines, plain or gzip) and load or rewrite them in the store.

The per-message DynamoDB operations live in :mod:`sidecar_tools.writer.store`; this module reads a
file line by line, maps each email with :func:`to_items` and reports bad lines as
:class:`Rejected` rather than failing the whole file.

``load_file(..., atomic=False)`` is a bulk mode for big loads: stock moto 5.2.5 deep-copies the
whole table (stream records included) for every operation of a TransactWriteItems, so there the
atomic path slows down quadratically (the stack's ``sidecar_tools.stack.moto_server`` avoids that,
but bulk is still several times faster). Bulk mode skips messages whose
META pointer exists, batch-writes Message, Body, participants and references, then the pointer
(the commit marker), and finally recomputes each touched summary from its Message items. It is
idempotent and rerunning a crashed load repairs it, but not atomic: readers can briefly see a
message's items before its pointer and summary.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from sidecar_tools.writer.mapping import MessageItems, to_items
from sidecar_tools.writer.parse import InvalidEmail, validate_mailbox_id
from sidecar_tools.writer.store import refresh_thread, rewrite_message, store_bulk, store_message


@dataclass(frozen=True, slots=True)
class Rejected:
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """``stored`` new messages, ``already_present`` re-deliveries, ``rejected`` bad lines."""

    stored: int
    already_present: int
    rejected: tuple[Rejected, ...]


Progress = Callable[[int, int], None]  # (bytes of the file read so far, file size)


def read_emails(path: Path, progress: Progress | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON or :class:`Rejected`) per non-blank line; plain or gzip.

    Raises OSError when the file cannot be read (also for a gzip stream cut short).
    """
    total = path.stat().st_size
    with path.open("rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        lines = gzip.GzipFile(fileobj=raw) if gz else raw
        number = 0
        try:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield number, _parse_line(number, line)
                if progress:
                    progress(raw.tell(), total)
        except (EOFError, zlib.error) as err:
            raise OSError(f"{path}: unreadable after line {number}: {err}") from err


def _parse_line(number: int, line: bytes) -> Any:
    try:
        return json.loads(line)
    except UnicodeDecodeError as err:
        return Rejected(number, f"not UTF-8 at byte {err.start}")
    except json.JSONDecodeError as err:
        return Rejected(number, f"invalid JSON: {err.msg} (column {err.colno})")


def _apply_file(
    path: Path, mailbox_id: str, write: Callable[[MessageItems], bool],
    edit: Callable[[Any], Any], progress: Progress | None,
) -> tuple[int, int, tuple[Rejected, ...]]:
    validate_mailbox_id(mailbox_id)
    written = skipped = 0
    rejected: list[Rejected] = []
    for number, parsed in read_emails(path, progress):
        if isinstance(parsed, Rejected):
            rejected.append(parsed)
            continue
        try:
            ok = write(to_items(edit(parsed), mailbox_id))
        except InvalidEmail as err:
            rejected.append(Rejected(number, str(err)))
            continue
        except ClientError as err:
            if err.response["Error"]["Code"] != "ValidationException":
                raise
            rejected.append(Rejected(number, f"DynamoDB refused it: {err}"))
            continue
        written, skipped = written + ok, skipped + (not ok)
    return written, skipped, tuple(rejected)


def load_file(
    client: Any, table: str, path: Path, mailbox_id: str,
    progress: Progress | None = None, *, atomic: bool = True,
) -> LoadSummary:
    """Store every NormalizedEmail line of ``path``; bad lines are reported, never fatal.

    ``atomic=False`` selects the bulk mode described in the module docstring.
    """
    touched: set[str] = set()

    def write(items: MessageItems) -> bool:
        if atomic:
            return store_message(client, table, items)
        touched.add(items.thread_key)
        return store_bulk(client, table, items)

    stored, present, rejected = _apply_file(Path(path), mailbox_id, write, lambda e: e, progress)
    for thread_key in sorted(touched):
        refresh_thread(client, table, mailbox_id, thread_key)
    return LoadSummary(stored, present, rejected)


def rewrite_file(
    client: Any, table: str, path: Path, mailbox_id: str,
    spec_version: str | None = None, progress: Progress | None = None,
) -> LoadSummary:
    """Rewrite each email of ``path`` in place (``stored`` = rewritten, ``already_present`` =
    not in the store, so nothing to rewrite), optionally overriding ``processing.specVersion``.
    """

    def edit(email: Any) -> Any:
        if spec_version is None or not isinstance(email, dict):
            return email
        raw = email.get("processing")
        processing = raw if isinstance(raw, dict) else {}
        return {**email, "processing": {**processing, "specVersion": spec_version}}

    done, missing, rejected = _apply_file(
        Path(path), mailbox_id, lambda i: rewrite_message(client, table, i), edit, progress
    )
    return LoadSummary(done, missing, rejected)
