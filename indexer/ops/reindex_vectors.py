"""``sidecar reindex --vectors``: move the vector index to a new encoder configuration.

The same shape as the full-text reindex (:mod:`indexer.ops.reindex`, whose argument for "no
update is lost" holds word for word: every vectors batch reads its targets afresh, see
:mod:`indexer.pipeline.vector_sync`). A new collection (``<prefix>-<model>[-t<N>][-<recipe>]``:
another model, truncation or embedded text, see :mod:`indexer.adapters.qdrant.targets`) joins
the write alias ``<prefix>-vectors-write``; a consistent Scan of
the table sends every message through the normal vectors task, which embeds for each target
with that target's encoder (its own cache: vectors differ by encoder); points per mailbox
must equal the table's messages with a non-blank ``forai``; then one
``update_collection_aliases`` call swaps both aliases. The old collection stays a write target
for ``--rollback`` until ``--finish``.

This command never opens the Qdrant store: the embedded store admits one process, so every
collection operation is a small task run by the vectors worker (or ``sidecar serve``) on its
queue (:mod:`indexer.pipeline.vector_admin`). Searches embed the query with the configured
truncation; queries are far shorter than any truncation, so that is the same vector.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.store import message_items
from indexer.ops.reindex import (
    Counts,
    ReindexError,
    ReindexReport,
    Say,
    agree,
    backfill,
    combine,
)
from indexer.settings import Settings


class Admin:
    """Collection operations, run by the process that owns the vector store."""

    def __init__(self, settings: Settings, timeout_s: float = 300.0) -> None:
        self.settings, self.timeout_s = settings, timeout_s

    def __call__(self, op: str, **args: Any) -> Any:
        from indexer.pipeline.vector_admin import vectors_admin

        pending = vectors_admin.apply_async(args=[op, args], queue=self.settings.vectors_queue)
        return pending.get(timeout=self.timeout_s, propagate=True)

    def state(self) -> tuple[str | None, str | None, str]:
        """(read collection, extra write collection, the configured base collection)."""
        found = self("state")
        read, extra = found["members"].values()
        return read, extra, str(found["base"])


def text_counts(settings: Settings) -> dict[str, int]:
    """Messages per mailbox with a non-blank ``forai`` (those have a point)."""
    items = message_items(aws.client(settings, "dynamodb"), settings.table, "forai")
    return dict(
        Counter(ref.mailbox_id for ref, item in items if item.get("forai", {}).get("S", "").strip())
    )


def _start(
    admin: Admin,
    max_tokens: int | None,
    say: Say,
    model: str | None = None,
    recipe: str | None = None,
) -> tuple[str, str]:
    read, extra, _base = admin.state()
    if read is None:
        raise ReindexError("no vector alias yet: start a vectors worker first")
    if extra is not None:
        raise ReindexError(
            f"{extra} is already an extra vector target: a reindex is running, or it is kept "
            "for rollback (`sidecar reindex --vectors --finish` drops it)"
        )
    try:
        named = admin("name", max_tokens=max_tokens, model=model, recipe=recipe)
    except ValueError as exc:
        raise ReindexError(str(exc)) from exc
    new = str(named["collection"])
    if new == read:
        raise ReindexError(
            f"searches already read {read}; choose another --max-tokens, --model or --recipe"
        )
    if admin("exists", collection=new):
        say(f"dropping {new}: an unaliased leftover of an earlier attempt")
        admin("drop", collection=new)
    admin("create", collection=new, dim=named["dim"])
    admin("aliases", read=read, extra=new)
    say(f"{new} created and added as a vector write target")
    return read, new


def reindex_vectors(
    settings: Settings,
    max_tokens: int | None,
    *,
    settle_s: float = 2.0,
    verify_timeout_s: float = 300.0,
    task_timeout_s: float = 3600.0,
    say: Say = lambda _msg: None,
    model: str | None = None,
    recipe: str | None = None,
) -> ReindexReport:
    """Build the collection of a new encoder (truncation ``max_tokens``, ``model``: a model
    spec the workers know, see ``SIDECAR_EMBED_MODELS``; ``recipe``: the embedded text; each
    None: the workers' configured one) beside the live one, verify, swap."""
    began, admin = time.monotonic(), Admin(settings)
    old, new = _start(admin, max_tokens, say, model, recipe)
    report = ReindexReport(old, new)
    try:
        time.sleep(settle_s)
        report.backfilled, report.dead_lettered = backfill(settings, task_timeout_s, "vectors")
        say(f"backfilled {report.backfilled} messages ({len(report.dead_lettered)} dead-lettered)")
        if report.dead_lettered:
            raise ReindexError(f"{len(report.dead_lettered)} message(s) failed; see `sidecar dlq`")

        def read() -> Counts:
            table = text_counts(settings)
            return combine(table, admin("counts", collection=old), admin("counts", collection=new))

        report.counts = agree(read, verify_timeout_s, say)
        admin("aliases", read=new, extra=old)
    except BaseException:
        admin("aliases", read=old, extra=None)
        admin("drop", collection=new)
        raise
    say(f"searches now read {new}; {old} is kept in step for `--rollback`")
    report.seconds = time.monotonic() - began
    return report


def rollback_vectors(settings: Settings) -> tuple[str, str]:
    """Searches read the kept collection again (returns it, and the one now kept)."""
    admin = Admin(settings)
    read, extra, _ = admin.state()
    if read is None or extra is None:
        raise ReindexError("no vector collection is kept for rollback")
    admin("aliases", read=extra, extra=read)
    return extra, read


def finish_vectors(settings: Settings, grace_s: float = 30.0, say: Say = lambda _m: None) -> str:
    """Stop writing the kept collection, wait ``grace_s`` for batches already running, drop it."""
    admin = Admin(settings)
    read, extra, _ = admin.state()
    if extra is None:
        raise ReindexError("no vector collection is kept")
    admin("aliases", read=read, extra=None)
    say(f"{extra} is no longer written; dropping it in {grace_s:.0f}s")
    time.sleep(grace_s)
    admin("drop", collection=extra)
    return extra
