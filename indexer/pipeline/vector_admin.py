"""Vector collection operations run *by the vectors worker*, on its queue.

The embedded Qdrant store admits one process (the vectors worker, or ``sidecar serve``), so
``sidecar reindex --vectors`` never opens it: it sends these small JSON tasks to the process
that owns it. With a Qdrant server the same path is used, so both modes run one code path.
"""

from __future__ import annotations

from typing import Any

from indexer.adapters import vector_targets as vt
from indexer.pipeline import deps
from indexer.pipeline.celery_app import app
from indexer.settings import get_settings


def run(op: str, args: dict[str, Any]) -> Any:
    """One operation on this process's vector index (see :mod:`indexer.adapters.vector_targets`)."""
    index = deps.vector_index(get_settings())
    if op == "state":
        return {"members": vt.members(index), "base": index.collection}
    if op == "exists":
        return vt.exists(index, args["collection"])
    if op == "create":
        return vt.create(index, args["collection"])
    if op == "drop":
        return vt.drop(index, args["collection"])
    if op == "aliases":
        return vt.set_aliases(index, args["read"], args["extra"])
    if op == "counts":
        return vt.point_counts(index, args["collection"])
    if op == "hashes":
        return vt.point_hashes(index, args["collection"], args["mailbox_id"])
    raise ValueError(f"unknown vectors admin operation {op!r}")


@app.task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    name="sidecar.vectors_admin", acks_late=True, reject_on_worker_lost=True
)
def vectors_admin(op: str, args: dict[str, Any]) -> Any:
    return run(op, args)
