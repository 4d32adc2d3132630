"""Ranked candidates as the API shows them: joined to their hot rows, scored by the policy,
rendered through the contract (:class:`search_api.models.Hit`; never bcc).

The join is the API's one read of the table per page. It reads **eventually consistent**
(half the read units of a strong read) and re-reads only the keys it missed strongly:

- a hit comes from an index, which applied the message's stream record; the record is
  written after the row, so the row is older than the index entry by at least the stream
  delay. An eventual read may still miss it, or show the version before an update, within
  DynamoDB's usual propagation (about a second) — a version no older than the one the index
  shows, so a stale field is no worse than the index's own lag;
- a *miss* is never trusted: dropping the hit and asking for a repair on an eventual miss
  would hide a live message from that page. The missed keys are read again, strongly, in a
  second request; only a row absent from the strong read drops its hit and is repaired
  (the pipeline re-reads the table strongly before it deletes anything).

The strong re-read costs nothing on a page without stale hits; with one, it costs one small
request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from indexer.core.items import message_sk, thread_pk
from indexer.core.plan import MessageRef
from indexer.metrics import MALFORMED_FIELDS
from indexer.settings import Settings
from search_api.backends import Backends
from search_api.candidates import Candidate

Key = tuple[str, str]
ROW_FIELDS = (
    "message_id",
    "thread_id",
    "subject",
    "date",
    "ts",
    "forai",
    "attachment_count",
    "size_bytes",
    "spec_version",
    "in_reply_to",
    "clean_fallback",
)
THREAD_SIZE = "thread_messages"  # messages in the hit's thread (the thread summary's count)


def row_key(mailbox: str, thread_key: str, ts: int, message_key: str) -> Key:
    """A message's hot row (pk, sk)."""
    return thread_pk(mailbox, thread_key), message_sk(ts, message_key)


def read_rows(backends: Backends, keys: Sequence[Key]) -> dict[Key, dict[str, Any]]:
    """The items found for ``keys``: eventually consistent, the misses re-read strongly
    (see the module docstring for why a miss is never trusted)."""
    rows = backends.rows(keys, consistent=False)
    missed = [k for k in dict.fromkeys(keys) if k not in rows]
    if missed:
        rows |= backends.rows(missed, consistent=True)
    return rows


def join_rows(
    backends: Backends, mailbox: str, hits: list[Candidate], also: Sequence[Key] = ()
) -> tuple[list[tuple[Candidate, dict[str, Any]]], set[Key]]:
    """Each hit with its hot Message row, rank order kept; vanished rows are dropped and their
    messages repaired (deleted from both indexes through the normal pipeline). The thread
    summaries come in the same read: their ``message_count`` is the hit's thread size.
    ``also``: other keys read in the same request; those found are returned beside."""
    keys = {c.message_key: row_key(mailbox, c.thread_key, c.ts, c.message_key) for c in hits}
    threads = {c.thread_key: (thread_pk(mailbox, c.thread_key), "THREAD") for c in hits}
    rows = read_rows(backends, [*keys.values(), *threads.values(), *also])
    joined = [
        (c, {**rows[keys[c.message_key]], THREAD_SIZE: _count(rows.get(threads[c.thread_key]))})
        for c in hits
        if keys[c.message_key] in rows
    ]
    gone = [MessageRef(mailbox, c.message_key) for c in hits if keys[c.message_key] not in rows]
    if gone:
        backends.repair(gone)
    return joined, {k for k in also if k in rows}


def policy_scores(settings: Settings, ranked: list[Candidate], first_rank: int) -> list[float]:
    """The scores a response shows: by default ``1 / (1 + rank)`` (rank 0-based across pages).

    Every mailbox shares one index, so BM25 scores use every mailbox's term statistics: a raw
    score would move when *another* mailbox is indexed and tell how common a word is there.
    A rank-derived score carries only this response's order. ``SIDECAR_EXPOSE_SCORES=true``
    (a single-tenant deployment) returns the engines' raw scores instead.
    """
    if settings.expose_scores:
        return [c.score for c in ranked]
    return [1.0 / (1 + first_rank + i) for i in range(len(ranked))]


def shown(
    settings: Settings,
    joined: list[tuple[Candidate, dict[str, Any]]],
    mode: str,
    first_rank: int = 0,
) -> list[dict[str, Any]]:
    """The joined page as the API's hits, scored by the policy."""
    scores = policy_scores(settings, [c for c, _ in joined], first_rank)
    return [render(c, row, mode, s) for (c, row), s in zip(joined, scores, strict=True)]


def _count(summary: dict[str, Any] | None) -> int | None:
    """A thread summary's ``message_count`` (None while the writer has not stored it); a
    malformed one (the writer's bug: ``"many"``, ``-3``, ``1.5``) is shown as null and
    counted, never a 500 for every page that holds the thread."""
    count = (summary or {}).get("message_count")
    if count is None:
        return None
    try:
        number = int(count)
    except (TypeError, ValueError, OverflowError):
        number = -1
    if number < 0 or (number != count and not (isinstance(count, str) and count.isdigit())):
        MALFORMED_FIELDS.labels(field="message_count").inc()
        return None
    return number


_NUMBERS = frozenset({"ts", "attachment_count", "size_bytes"})


def _shown(name: str, value: Any) -> str | int | None:
    """A hot row's field as the contract types it (:class:`search_api.models.Hit`: numbers,
    else strings); a malformed one (the writer's bug, not the caller's) is shown as null and
    counted, never a 500 for every page that holds the message."""
    if value is None or (isinstance(value, str) and name not in _NUMBERS):
        return value
    if name in _NUMBERS:
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            pass
    MALFORMED_FIELDS.labels(field=name).inc()
    return None


def render(
    candidate: Candidate, row: dict[str, Any], mode: str, score: float | None = None
) -> dict[str, Any]:
    """The API's hit: identity, score, highlights, and the hot row's fields (never bcc)."""
    hit: dict[str, Any] = {
        "message_key": candidate.message_key,
        "thread_key": candidate.thread_key,
        "score": candidate.score if score is None else score,
        "from": {
            "email": _shown("from_email", row.get("from_email") or None),
            "name": _shown("from_name", row.get("from_name")),
        },
    }
    for name in ROW_FIELDS:  # clean_fallback is a flag (1/0 in the row): any value is one
        value = row.get(name)
        hit[name] = bool(value) if name == "clean_fallback" else _shown(name, value)
    hit[THREAD_SIZE] = row.get(THREAD_SIZE)
    if mode == "fulltext" or candidate.highlights:
        hit["highlights"] = candidate.highlights or {}
    if candidate.thread_hits is not None:
        hit["thread_hits"] = candidate.thread_hits
    return hit
