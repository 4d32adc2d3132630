"""``sidecar reconcile``: compare the table with both indexes, and optionally repair the drift.

Why it is shaped this way:
- The table side is read per mailbox from GSI1 (paged on ``LastEvaluatedKey``) plus each
  message's Body; the indexes are scanned by mailbox. GSI1 is eventually consistent, so every
  difference found is *confirmed* with the pipeline's own strongly consistent read (META →
  Message, Body) before it is reported: a message written or deleted a moment ago is not drift.
- Repair goes through the pipeline's read-write-verify sync (``indexer.pipeline.sync``), the
  very code the Celery tasks run, in this process: it needs no running worker, works with the
  embedded Qdrant store (which this command already holds), and tolerates workers running
  beside it (the sync converges under any number of concurrent writers). Messages an index
  rejects are dead-lettered as a task would. Repaired messages are then read back and
  compared again; only what still differs counts as ``drifted``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from indexer.adapters import factories
from indexer.core.documents import MessageState
from indexer.core.drift import (
    FULLTEXT_FIELDS,
    INDEXES,
    Drift,
    Index,
    View,
    compare,
    counts,
    expected_views,
    fulltext_view,
)
from indexer.core.errors import TransientError
from indexer.core.items import message_pk
from indexer.core.plan import MessageRef
from indexer.core.task_payload import TaskPayload
from indexer.ops.engines import Engines, open_engines, read_recipe
from indexer.pipeline.contacts_sync import fulltext_sink
from indexer.pipeline.sync import Outcome, sync_fulltext, sync_vectors
from indexer.settings import Settings

log = logging.getLogger(__name__)
Progress = Callable[[int], None]
Views = dict[Index, dict[MessageRef, View | None]]


@dataclass(frozen=True, slots=True)
class MailboxSummary:
    """Sizes of one mailbox on each side, and its (confirmed) drift by index and kind."""

    mailbox_id: str
    table_messages: int
    fulltext_docs: int
    vector_points: int
    drift: dict[str, int]


@dataclass(frozen=True)
class ReconcileReport:
    """``found``: drift seen; ``remaining``: what still differs (after repair, if asked)."""

    mailboxes: tuple[MailboxSummary, ...]
    found: tuple[Drift, ...]
    remaining: tuple[Drift, ...]
    repair: bool = False

    @property
    def drifted(self) -> int:
        """Messages × indexes still out of step: 0 means the indexes match the table."""
        return len(self.remaining)

    @property
    def repaired(self) -> int:
        return len(self.found) - len(self.remaining) if self.repair else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "drifted": self.drifted,
            "found": len(self.found),
            "repaired": self.repaired,
            "repair": self.repair,
            "mailboxes": [asdict(m) for m in self.mailboxes],
            "drift": [d.to_json() for d in self.found],
            "remaining": [d.to_json() for d in self.remaining],
        }


@dataclass
class _Side:
    """One mailbox as the table and the two indexes see it."""

    expected: Views = field(default_factory=lambda: {i: {} for i in INDEXES})
    actual: dict[Index, dict[MessageRef, View]] = field(
        default_factory=lambda: {i: {} for i in INDEXES}
    )
    table_messages: int = 0


def reconcile(
    settings: Settings,
    mailbox: str | None = None,
    repair: bool = False,
    progress: Progress | None = None,
) -> ReconcileReport:
    """Compare every mailbox (or one) in the table with both indexes; repair if asked."""
    with open_engines(settings) as opened:
        engines = replace(opened, vector_recipe=read_recipe(settings, opened.vectors))
        engines.fulltext.refresh()
        names = [mailbox] if mailbox is not None else sorted(_all_mailboxes(engines))
        summaries, found = [], []
        for name in names:
            summary, drift = _check_mailbox(engines, name, progress)
            summaries.append(summary)
            found.extend(drift)
        remaining = _repair(settings, engines, found) if repair and found else found
    return ReconcileReport(tuple(summaries), tuple(found), tuple(remaining), repair)


def _all_mailboxes(engines: Engines) -> set[str]:
    return (
        engines.store.mailbox_ids() | engines.fulltext.mailbox_ids() | engines.vectors.mailbox_ids()
    )


def _check_mailbox(
    engines: Engines, mailbox: str, progress: Progress | None
) -> tuple[MailboxSummary, list[Drift]]:
    side = _Side()
    for page in engines.store.mailbox_pages(mailbox):
        for state in _page_states(engines, mailbox, page):
            for index, view in expected_views(state, engines.vector_recipe).items():
                side.expected[index][state.ref] = view
        side.table_messages += len(page)
        if progress is not None:
            progress(len(page))
    side.actual["fulltext"] = {
        MessageRef(mailbox, str(src.get("message_key"))): _fulltext(src)
        for src in engines.fulltext.scan_mailbox(mailbox, FULLTEXT_FIELDS)
    }
    side.actual["vectors"] = {
        MessageRef(mailbox, str(p.get("message_key"))): dict(p)
        for page in engines.vectors.scroll_mailbox(mailbox)
        for p in page
    }
    candidates = [d for i in INDEXES for d in compare(i, side.expected[i], side.actual[i])]
    drift = _confirm(engines, candidates, side.actual)
    summary = MailboxSummary(
        mailbox,
        side.table_messages,
        len(side.actual["fulltext"]),
        len(side.actual["vectors"]),
        counts(drift),
    )
    return summary, drift


def _fulltext(source: Mapping[str, Any]) -> View:
    return fulltext_view(source) or {}


def _page_states(engines: Engines, mailbox: str, page: Sequence[Any]) -> Iterator[MessageState]:
    """Message items of one GSI1 page, each with its Body (one BatchGetItem per 100)."""
    keys = {
        str(item["message_key"]): (message_pk(mailbox, str(item["message_key"])), "BODY")
        for item in page
    }
    bodies = engines.store.get_items(keys.values())
    for item in page:
        ref = MessageRef(mailbox, str(item["message_key"]))
        yield MessageState(ref, item, bodies.get(keys[ref.message_key]))


def _confirm(
    engines: Engines, candidates: Iterable[Drift], actual: Mapping[Index, Mapping[MessageRef, View]]
) -> list[Drift]:
    """Re-judge candidates against a strongly consistent read of their messages."""
    refs = {d.ref for d in candidates}
    if not refs:
        return []
    expected = _expected(engines, refs)
    return [
        d
        for i in INDEXES
        for d in compare(
            i,
            {r: expected[i][r] for r in refs},
            {r: actual[i][r] for r in refs if r in actual[i]},
        )
    ]


def _expected(engines: Engines, refs: Collection[MessageRef]) -> Views:
    views: Views = {i: {} for i in INDEXES}
    for ref, state in engines.store.read_states(refs, participants=False).items():
        for index, view in expected_views(state, engines.vector_recipe).items():
            views[index][ref] = view
    return views


def _chunks(refs: Sequence[MessageRef], size: int) -> Iterator[list[MessageRef]]:
    for start in range(0, len(refs), size):
        yield list(refs[start : start + size])


class _LazyEmbedder:
    """Loads the model only if a repaired point needs a vector the cache does not hold."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def embed(self, texts: list[str]) -> list[list[float]]:
        return factories.embedder(self._settings).embed(texts)


def _repair(settings: Settings, engines: Engines, drift: Sequence[Drift]) -> list[Drift]:
    """Run the pipeline's sync for every drifted message, then compare those messages again."""
    embedder = _LazyEmbedder(settings)
    syncs: dict[Index, Callable[[list[MessageRef]], Outcome]] = {
        "fulltext": lambda refs: sync_fulltext(engines.store, fulltext_sink(settings), refs),
        "vectors": lambda refs: sync_vectors(
            engines.store, engines.vectors, embedder, refs, engines.vector_recipe
        ),
    }
    for index in INDEXES:
        refs = sorted({d.ref for d in drift if d.index == index})
        for chunk in _chunks(refs, settings.batch_messages):
            try:
                _dead_letter(settings, index, syncs[index](chunk))
            except TransientError as exc:  # left as drift: the command exits non-zero
                log.warning("repair of %d %s message(s) failed: %s", len(chunk), index, exc)
    engines.fulltext.refresh()
    return _recheck(engines, {d.ref for d in drift})


def _dead_letter(settings: Settings, stage: Index, outcome: Outcome) -> None:
    store = factories.dead_letters(settings)
    for ref, reason in outcome.poison.items():
        payload = TaskPayload.of([ref]).to_json()
        store.add(stage=stage, reason=reason, payload=payload, mailbox_id=ref.mailbox_id)


def _recheck(engines: Engines, refs: Collection[MessageRef]) -> list[Drift]:
    """Compare these messages again, reading each index entry directly (real time)."""
    expected = _expected(engines, refs)
    sources = engines.fulltext.sources(refs, FULLTEXT_FIELDS)
    actual: dict[Index, dict[MessageRef, View]] = {
        "fulltext": {r: _fulltext(s) for r, s in sources.items()},
        "vectors": dict(engines.vectors.existing_payloads(refs)),
    }
    return [d for i in INDEXES for d in compare(i, expected[i], actual[i])]
