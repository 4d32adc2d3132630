"""``sidecar bench-tenants``' options and vocabulary: the mailbox classes and search modes.

A module of its own because every part of the bench reads them (the build, the measurements,
the report, the run): kept apart from all of them, none has to import another for them, and
the report stays free of the engines' clients.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Log = Callable[[str], None]
CLASSES = ("whale", "mid", "small")
MODES = ("fulltext", "semantic", "hybrid", "similar")


@dataclass(frozen=True)
class TenantOptions:
    """What to build and how long to measure (see :mod:`sidecar_tools.bench.tenants`)."""

    corpus: Path | None
    messages: int = 20_000
    mailboxes: int = 1_000
    whale_share: float = 0.1
    mid_mailboxes: int = 300
    mid_share: float = 0.5
    distinct: int = 2_000
    backend: str = "edge"  # or "server"
    shards: int = 4
    clients: int = 8
    search_seconds: float = 10.0
    queries: int = 20  # per mode and class
    compare_float32: bool = True
    workdir: Path = Path(".sidecar/bench")
    # purge the whale while the mid-size and small mailboxes are searched (server backend
    # only: the embedded store's one owner is the API, so a purge cannot run beside it)
    purge: bool = False
    # recall@10 per class: one query missing a cluster of near-copies moves 20 queries' mean
    # by 0.05, 200 queries' by 0.005 (the 0.99 target needs the finer step)
    recall_queries: int = 200
