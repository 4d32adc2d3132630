"""Bring each sink in line with the table for a set of messages: read, write, verify.

Why verify: two workers may handle the same message at once (duplicates, retries, a Body and
a Message record in different batches). Each worker re-reads the table (strongly consistent)
*after* its write and repeats while what it wrote differs from what the table now holds. The
last write to a sink is therefore always followed by a read that matches it, and any later
table change produces a new record whose processing reads after that change: the sink
converges to the table without locks, versions or tombstones, and a delete sticks because a
late record only triggers a re-read that finds the message gone. The first read may
therefore be eventually consistent (``SIDECAR_FIRST_READ``, a backfill's tasks always): a
stale one is caught by the strong read after the write and only costs another round.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from indexer.core.documents import (
    MessageState,
    Participant,
    VectorTarget,
    document_hash,
    search_document,
    vector_target,
)
from indexer.core.errors import TransientError
from indexer.core.plan import (
    BODY_WANTED,
    KNOWN_KEYS,
    MAIL_READ_CONSISTENT,
    MessageRef,
    ParticipantRef,
)
from indexer.core.recipes import DEFAULT_RECIPE, Recipe

MAX_ROUNDS = 5
A = TypeVar("A")
B = TypeVar("B")


class StagedParticipants(Protocol):
    """A participant-store sync that has read and not yet written."""

    @property
    def projected(self) -> Mapping[MessageRef, Sequence[Participant]]:
        """Each touched message's participants once :meth:`commit` has run."""
        ...

    def commit(self) -> None: ...


class TableReader(Protocol):
    def read_states(
        self, refs: Collection[MessageRef], *, participants: bool
    ) -> dict[MessageRef, MessageState]: ...

    def stage_participants(self, refs: Collection[ParticipantRef]) -> StagedParticipants: ...


class FullTextSink(Protocol):
    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        """Index (or delete, for None) each document; returns poison rejections by message."""
        ...


class VectorSink(Protocol):
    def existing_payloads(
        self, refs: Collection[MessageRef]
    ) -> dict[MessageRef, dict[str, Any]]: ...
    def cached_vectors(self, hashes: Collection[str]) -> dict[str, list[float]]: ...
    def remember(self, vectors: Mapping[str, list[float]]) -> None: ...
    def upsert(self, points: list[tuple[MessageRef, list[float], Mapping[str, Any]]]) -> None: ...
    def set_payloads(self, payloads: Mapping[MessageRef, Mapping[str, Any]]) -> None: ...
    def delete(self, refs: Collection[MessageRef]) -> None: ...
    def flush(self) -> None:
        """End of a batch that wrote: make its writes durable."""
        ...


class TextEmbedder(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass
class Outcome:
    """What one batch achieved: messages applied, poison ones (with reasons), embeddings run."""

    applied: set[MessageRef] = field(default_factory=set)
    poison: dict[MessageRef, str] = field(default_factory=dict)
    embedded: int = 0
    embed_s: float = 0.0  # of the batch's time, seconds spent inside the embedder
    # Messages written again because a verify read found the table changed since the read
    # their write used: a stale eventually consistent first read, or a concurrent change.
    rewritten: int = 0


def _converge(
    refs: Collection[MessageRef],
    read: Callable[[Collection[MessageRef]], Mapping[MessageRef, Any]],
    write: Callable[[Mapping[MessageRef, Any]], dict[MessageRef, str]],
    fingerprint: Callable[[Any], str],
) -> Outcome:
    outcome = Outcome()
    pending = set(refs)
    targets = read(pending)
    for _ in range(MAX_ROUNDS):
        outcome.poison.update(write(targets))
        pending -= outcome.poison.keys()
        again = read(pending)
        pending = {r for r in pending if fingerprint(again[r]) != fingerprint(targets[r])}
        outcome.applied |= set(targets) - pending - outcome.poison.keys()
        if not pending:
            return outcome
        outcome.rewritten += len(pending)
        targets = {r: again[r] for r in pending}
    raise TransientError(f"{len(pending)} message(s) kept changing during sync; retry later")


class _Reader:
    """A sink's reads of the table: the first one full (eventually consistent when asked,
    ``MAIL_READ_CONSISTENT``), each verify read strong and with the keys the previous read
    found (``KNOWN_KEYS``: META is not read again), the Body only if wanted."""

    def __init__(self, table: TableReader, *, participants: bool, body: bool,
                 eventual: bool = False) -> None:
        self._table, self._participants, self._body = table, participants, body
        self._known: dict[MessageRef, tuple[str, int]] = {}
        self._eventual = eventual  # the next read may be eventual: only the first

    def __call__(self, refs: Collection[MessageRef]) -> dict[MessageRef, MessageState]:
        known = KNOWN_KEYS.set(dict(self._known) or None)
        body = BODY_WANTED.set(self._body)
        consistent = MAIL_READ_CONSISTENT.set(not self._eventual)
        self._eventual = False
        try:
            states = self._table.read_states(refs, participants=self._participants)
        finally:
            MAIL_READ_CONSISTENT.reset(consistent)
            BODY_WANTED.reset(body)
            KNOWN_KEYS.reset(known)
        for ref, state in states.items():
            msg = state.message
            if msg is None or msg.get("thread_key") is None or msg.get("ts") is None:
                self._known.pop(ref, None)
            else:
                self._known[ref] = (str(msg["thread_key"]), int(msg["ts"]))
        return states


def _beside(other: Callable[[], A], own: Callable[[], B]) -> tuple[A, B]:
    """``other`` on a thread of its own (in a copy of this context: spans nest) while ``own``
    runs here; both results once both have returned (an error of ``own`` wins)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        running = pool.submit(contextvars.copy_context().run, other)
        mine = own()
        return running.result(), mine


class _ParticipantsBeside:
    """The participant store's sync folded into a full-text sync's first round: its reads run
    beside the first read of the messages, whose documents take the participants the store
    *will* hold, and its writes beside the first bulk request.

    Why: a new message's participant items arrive in the same batch as the message, and
    writing the store before reading the message put three DynamoDB round trips in front of
    the document (their tail was the full-text path's largest, issue 42). Safe because the
    verify read starts after both writes returned and reads the store again: a concurrent
    sync of another participant of the same message shows as a changed document and is
    written again, exactly as when the store was written first.
    """

    def __init__(self, table: TableReader, refs: Collection[ParticipantRef]) -> None:
        self._table, self._refs = table, refs
        self._staged: StagedParticipants | None = None
        self._first_read = True

    def read(self, reader: _Reader, refs: Collection[MessageRef]) -> dict[MessageRef, MessageState]:
        if not self._first_read:
            return reader(refs)
        self._first_read = False
        staged, states = _beside(lambda: self._table.stage_participants(self._refs),
                                 lambda: reader(refs))
        self._staged, projected = staged, staged.projected
        return {
            r: replace(s, participants=tuple(projected[r]))
            if s.message is not None and r in projected else s
            for r, s in states.items()
        }

    def writer(
        self, apply: Callable[[Mapping[MessageRef, Any]], dict[MessageRef, str]]
    ) -> Callable[[Mapping[MessageRef, Any]], dict[MessageRef, str]]:
        def write(docs: Mapping[MessageRef, Any]) -> dict[MessageRef, str]:
            staged, self._staged = self._staged, None
            if staged is None:
                return apply(docs)
            return _beside(staged.commit, lambda: apply(docs))[1]

        return write


def sync_fulltext(
    table: TableReader,
    sink: FullTextSink,
    messages: Collection[MessageRef],
    participants: Collection[ParticipantRef] = (),
    *,
    eventual: bool = False,
) -> Outcome:
    """Make the full-text index hold exactly the table's projection of these messages
    (``eventual``: the first read eventually consistent; every verify read stays strong), and
    the participant store these participant items (:class:`_ParticipantsBeside`)."""
    reader = _Reader(table, participants=True, body=True, eventual=eventual)
    beside = _ParticipantsBeside(table, participants) if participants else None

    def read(refs: Collection[MessageRef]) -> dict[MessageRef, Mapping[str, Any] | None]:
        states = reader(refs) if beside is None else beside.read(reader, refs)
        return {r: search_document(s) for r, s in states.items()}

    write = sink.apply if beside is None else beside.writer(sink.apply)
    return _converge(messages, read, write, document_hash)


def _vector_key(target: VectorTarget) -> str:
    return document_hash(dict(target.payload)) if target.text is not None else "absent"


class _VectorWriter:
    """One round of vector writes: delete, refresh payloads, embed only unseen text."""

    def __init__(self, sink: VectorSink, embedder: TextEmbedder, outcome: Outcome) -> None:
        self.sink, self.embedder, self.outcome = sink, embedder, outcome

    def __call__(self, targets: Mapping[MessageRef, VectorTarget]) -> dict[MessageRef, str]:
        present = {r: t for r, t in targets.items() if t.text is not None}
        self.sink.delete([r for r in targets if r not in present])
        existing = self.sink.existing_payloads(list(present))
        stale = {
            r: t
            for r, t in present.items()
            if existing.get(r, {}).get("content_hash") != t.payload["content_hash"]
        }
        self.sink.set_payloads(
            {
                r: t.payload
                for r, t in present.items()
                if r not in stale and existing[r] != t.payload
            }
        )
        vectors = self._vectors({t.payload["content_hash"]: str(t.text) for t in stale.values()})
        self.sink.upsert(
            [(r, vectors[t.payload["content_hash"]], t.payload) for r, t in stale.items()]
        )
        self.sink.flush()
        return {}

    def _vectors(self, texts: Mapping[str, str]) -> dict[str, list[float]]:
        """Vectors by content hash: from the cache, embedding (once) only what it lacks."""
        found = self.sink.cached_vectors(list(texts))
        missing = [h for h in texts if h not in found]
        if missing:
            fresh = dict(
                zip(missing, self.embedder.embed([texts[h] for h in missing]), strict=True)
            )
            self.sink.remember(fresh)
            self.outcome.embedded += len(fresh)
            found.update(fresh)
        return found


def sync_vectors(
    table: TableReader,
    sink: VectorSink,
    embedder: TextEmbedder,
    messages: Collection[MessageRef],
    recipe: Recipe = DEFAULT_RECIPE,
    *,
    eventual: bool = False,
) -> Outcome:
    """Make the vector index hold one point per stored message with non-empty ``forai``,
    embedding the text of ``recipe`` (the one the sink's collection is named after)."""
    outcome = Outcome()
    writer = _VectorWriter(sink, embedder, outcome)

    # A point never uses the Body.
    reader = _Reader(table, participants=False, body=False, eventual=eventual)

    def read(refs: Collection[MessageRef]) -> dict[MessageRef, VectorTarget]:
        return {r: vector_target(s, recipe) for r, s in reader(refs).items()}

    result = _converge(messages, read, writer, _vector_key)
    result.embedded = outcome.embedded
    return result
