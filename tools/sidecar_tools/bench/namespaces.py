"""The settings of one benchmark run that owns everything it writes, so runs never meet."""

from __future__ import annotations

from pathlib import Path

from indexer.settings import Settings


def own_namespace(base: Settings, name: str, qdrant_path: Path) -> Settings:
    """``base`` with its own mail table, state table, index, collection and queues, all
    named ``name``, and its embedded vector store at ``qdrant_path``."""
    return base.model_copy(update={
        "table": name,
        "state_table": f"{name}-state",
        "opensearch_index": name,
        "qdrant_collection": name,
        "qdrant_path": qdrant_path.resolve(),
        "queue_prefix": name,
    })
