"""Time windows of DynamoDB incremental exports, and the command that repairs a stream gap.

Pure (times in, windows and text out). AWS accepts an incremental export of at least 15 minutes
and at most 24 hours of changes (``ExportFromTime`` inclusive, ``ExportToTime`` exclusive).
A shorter window is widened backwards to 15 minutes and a longer one is cut into consecutive
24-hour windows: replaying extra rows is harmless (records are triggers), missing one is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

MIN_S = 15 * 60
MAX_S = 24 * 3600
GAP_MARGIN_S = 60  # stream times are approximate (whole seconds): the repair starts earlier


class ExportError(ValueError):
    """The export itself (not one row) is unusable: bad manifest, unsupported format, an
    export the table refused or that failed. Here, in the pure core, because both the reader
    of exports (``sources``) and the export requests (``adapters``) raise it."""


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """``[start, end)`` in epoch seconds; both None = a full export (the table now)."""

    start: int | None = None
    end: int | None = None

    @property
    def incremental(self) -> bool:
        return self.start is not None

    @property
    def key(self) -> str:
        """Names the window in the sidecar's state table (one export job per window)."""
        return "full" if self.start is None else f"{self.start}..{self.end}"


def parse_time(text: str) -> int:
    """Epoch seconds from ISO 8601 (``2026-12-01T09:00:00Z``; no zone = UTC) or a number."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"{text!r} is neither ISO 8601 nor epoch seconds") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp())


def iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def windows(start: int, end: int) -> list[Window]:
    """The incremental exports that cover ``[start, end)``, each 15 min to 24 h long."""
    if end <= start:
        raise ValueError(f"the window ends ({iso(end)}) before it starts ({iso(start)})")
    if end - start < MIN_S:
        return [Window(end - MIN_S, end)]
    cuts = list(range(start, end, MAX_S))
    found = [Window(a, min(a + MAX_S, end)) for a in cuts]
    last = found[-1]
    if last.end is not None and last.start is not None and last.end - last.start < MIN_S:
        found[-1] = Window(last.end - MIN_S, last.end)  # overlaps the previous one: harmless
    return found


def gap_command(since: int | None, seen: int) -> str:
    """The one command that repairs a stream gap: an incremental export from just before the
    last applied record to when the gap was seen (a full export when that record's time is
    unknown, e.g. a checkpoint written before this field existed)."""
    if since is None:
        return "sidecar backfill --export"
    return f"sidecar backfill --export --from {iso(since - GAP_MARGIN_S)} --to {iso(seen)}"
