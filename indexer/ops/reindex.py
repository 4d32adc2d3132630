"""``sidecar reindex``: move the full-text index to a new mapping version with no downtime.

Two aliases describe the state (both read in one cluster-state request by every write):

- ``<alias>``: what searches read (one index);
- ``<alias>-write``: extra write targets — the index being built, or after the swap the
  previous index, kept in step so that ``--rollback`` loses nothing.

Every full-text write goes to the members of both (:meth:`OpenSearchIndex.write_targets`).
Steps: create ``<alias>-v<N>`` from its template and add it to ``<alias>-write``; backfill it
from a strongly consistent Scan of the table through the normal full-text tasks; verify the
per-mailbox message counts (table = old = new); swap both aliases in one ``_aliases``
request; keep the old index as a write target. ``--rollback`` swaps back, ``--finish`` drops
the kept index. A failed build is taken out of the write alias and deleted.

Why no update made during the reindex is lost (records are triggers, see ``sync.py``): every
full-text batch reads the target list afresh (no cache). Let T0 be the moment the new index
joined ``<alias>-write`` (acknowledged). A batch that wrote a change C to the old index only
read the targets before T0; it was processing a record of C, which exists only once C has
happened, so C happened before T0. The backfill's Scan starts after T0 (plus ``settle_s`` of
margin), with ``ConsistentRead``, and each backfilled message is then read by a worker: it sees
C (or a later state). A change after T0 is handled by a batch that reads the targets after T0,
so it writes the new index too (a verify round that meets a newer change rewrites only the
old targets, but that change has its own record). Both kinds of writers follow
read-write-verify, so the new index converges to the table exactly as the old one does. The
swap moves both aliases in one atomic ``_aliases`` request: the set of write targets never
shrinks and searches always find exactly one index. No lock is taken: live updates never wait
for, or give up because of, a reindex. (A target cache with a TTL would need ``settle_s`` >
TTL: a batch could use a list read before T0 for a change made after it.)

Requirement: every worker runs code that knows ``<alias>-write`` (this version or later).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.store import message_items
from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.core.plan import MessageRef
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.dispatch import celery_send
from indexer.pipeline.ingest import Pending
from indexer.settings import Settings

Say = Callable[[str], None]
WINDOW = 8  # full-text batches in flight during the backfill


class ReindexError(RuntimeError):
    """The reindex cannot start or did not verify; the read alias was not moved."""


@dataclass
class ReindexReport:
    """What a reindex did: indices, messages backfilled, per-mailbox (table, old, new) counts."""

    old: str
    new: str
    backfilled: int = 0
    dead_lettered: list[MessageRef] = field(default_factory=list)
    counts: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    seconds: float = 0.0


def _single(members: list[str], what: str) -> str:
    if len(members) != 1:
        raise ReindexError(f"{what} should name one index, it names {members or 'none'}")
    return members[0]


# -- table side ---------------------------------------------------------------------------------
def table_counts(ddb: Any, table: str) -> dict[str, int]:
    """Messages per mailbox."""
    return dict(Counter(ref.mailbox_id for ref, _ in message_items(ddb, table)))


# -- index side ---------------------------------------------------------------------------------
def swap(index: OpenSearchIndex, *, read: str, keep: str) -> None:
    """Searches read ``read``; ``keep`` stays a write target. One atomic ``_aliases`` request,
    so the union of write targets is the same before and after it."""
    actions: list[dict[str, Any]] = [
        {"remove": {"index": keep, "alias": index.alias}},
        {"remove": {"index": read, "alias": index.write_alias}},
        {"add": {"index": read, "alias": index.alias, "is_write_index": True}},
        {"add": {"index": keep, "alias": index.write_alias}},
    ]
    index.update_aliases(actions)


# -- steps --------------------------------------------------------------------------------------
def _start(index: OpenSearchIndex, version: int, say: Say) -> tuple[str, str]:
    """Check the state, create the new index and make it a write target (time T0)."""
    state = index.aliases()
    old = _single(state[index.alias], f"alias {index.alias}")
    if state[index.write_alias]:
        raise ReindexError(
            f"{index.write_alias} already names {state[index.write_alias]}: a reindex is running, "
            "or its previous index is kept for rollback (`sidecar reindex --finish` drops it)"
        )
    new = index.index_name(version)
    if new == old:
        raise ReindexError(f"{index.alias} already reads {old}; choose another --to-version")
    if index.index_exists(new):
        say(f"deleting {new}: an unaliased leftover of an earlier attempt")
        index.delete_index(new)
    index.create_index(version)
    index.update_aliases(
        [{"add": {"index": new, "alias": index.write_alias}}]
    )
    say(f"{new} created (mapping v{version}) and added to {index.write_alias}")
    return old, new


def _chunks(refs: Iterable[MessageRef], size: int) -> Iterator[list[MessageRef]]:
    it = iter(refs)
    while batch := list(islice(it, size)):
        yield batch


def backfill(
    settings: Settings, timeout_s: float, stage: str = "fulltext"
) -> tuple[int, list[MessageRef]]:
    """Send every message of the table through the normal task of ``stage``; wait for all.

    The tasks write to every target, the new one included; returns (messages, dead-lettered).
    """
    send, ddb = celery_send(settings), aws.client(settings, "dynamodb")
    window: deque[Pending] = deque()
    sent, dead = 0, list[MessageRef]()

    def collect() -> None:
        result = window.popleft().get(timeout=timeout_s, propagate=True)
        dead.extend(MessageRef.from_json(r) for r in result.get("dead_lettered", []))

    refs = (ref for ref, _ in message_items(ddb, settings.table))
    for batch in _chunks(refs, settings.batch_messages):
        window.append(send(stage, TaskPayload.of(batch).to_json()))
        sent += len(batch)
        while len(window) > WINDOW:
            collect()
    while window:
        collect()
    return sent, dead


Counts = dict[str, tuple[int, int, int]]


def agree(read_counts: Callable[[], Counts], timeout_s: float, say: Say) -> Counts:
    """Per mailbox, (table, old, new) counts equal, each seen once after the backfill.

    Under live writes the three can differ for a moment (a change not yet applied); a mailbox
    counts as verified once a round finds the three equal. Raises if one never does.
    """
    confirmed: set[str] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        counts = read_counts()
        confirmed |= {b for b, (t, o, n) in counts.items() if t == o == n}
        if set(counts) <= confirmed:
            return counts
        open_ = {b: counts[b] for b in sorted(set(counts) - confirmed)[:5]}
        if time.monotonic() > deadline:
            raise ReindexError(f"counts (table, old, new) never agreed for {open_}")
        say(f"waiting for counts (table, old, new) to agree: {open_}")
        time.sleep(1.0)


def combine(table: dict[str, int], old: dict[str, int], new: dict[str, int]) -> Counts:
    boxes = set(table) | set(old) | set(new)
    return {b: (table.get(b, 0), old.get(b, 0), new.get(b, 0)) for b in boxes}


def verify(
    settings: Settings, index: OpenSearchIndex, old: str, new: str, timeout_s: float, say: Say
) -> Counts:
    """Messages per mailbox: table = old index = new index (see :func:`agree`)."""
    ddb = aws.client(settings, "dynamodb")

    def read() -> Counts:
        table = table_counts(ddb, settings.table)
        index.refresh(old, new)
        return combine(table, index.mailbox_counts(old), index.mailbox_counts(new))

    return agree(read, timeout_s, say)


def _abort(index: OpenSearchIndex, new: str) -> None:
    """Take a half-built index out of the writes and delete it (the read alias never moved)."""
    index.update_aliases([{"remove": {"index": new, "alias": index.write_alias}}], missing_ok=True)
    index.delete_index(new)


def reindex(
    settings: Settings,
    to_version: int = MAPPING_VERSION,
    *,
    settle_s: float = 2.0,
    verify_timeout_s: float = 300.0,
    task_timeout_s: float = 3600.0,
    say: Say = lambda _msg: None,
) -> ReindexReport:
    """Build ``<alias>-v<to_version>`` beside the live index, verify it, swap the alias."""
    began = time.monotonic()
    index = factories.fulltext_index(settings)
    old, new = _start(index, to_version, say)
    report = ReindexReport(old, new)
    try:
        # Writes read the targets per batch (no cache): any margin suffices; see the docstring.
        time.sleep(settle_s)
        report.backfilled, report.dead_lettered = backfill(settings, task_timeout_s)
        say(f"backfilled {report.backfilled} messages ({len(report.dead_lettered)} dead-lettered)")
        if report.dead_lettered:
            raise ReindexError(
                f"{len(report.dead_lettered)} message(s) rejected; see `sidecar dlq`"
            )
        report.counts = verify(settings, index, old, new, verify_timeout_s, say)
        swap(index, read=new, keep=old)
    except BaseException:
        _abort(index, new)
        raise
    say(f"{index.alias} now reads {new}; {old} is kept in step for `sidecar reindex --rollback`")
    report.seconds = time.monotonic() - began
    return report


def rollback(settings: Settings) -> tuple[str, str]:
    """Searches read the kept index again; the other one stays a write target (roll forward
    is another ``--rollback``). Returns (now read, now kept)."""
    index = factories.fulltext_index(settings)
    state = index.aliases()
    current = _single(state[index.alias], f"alias {index.alias}")
    kept = _single(state[index.write_alias], f"alias {index.write_alias}")
    swap(index, read=kept, keep=current)
    return kept, current


def finish(settings: Settings, grace_s: float = 30.0, say: Say = lambda _msg: None) -> str:
    """Stop writing the kept index, wait ``grace_s`` for batches that read the targets before
    that, then delete it. Returns its name."""
    index = factories.fulltext_index(settings)
    kept = _single(index.aliases()[index.write_alias], f"alias {index.write_alias}")
    index.update_aliases([{"remove": {"index": kept, "alias": index.write_alias}}])
    say(f"{kept} is no longer written; deleting it in {grace_s:.0f}s")
    time.sleep(grace_s)
    index.delete_index(kept)
    return kept
