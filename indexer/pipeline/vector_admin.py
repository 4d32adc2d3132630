"""Vector collection operations run *by the vectors worker*, on its queue.

The embedded Qdrant store admits one process (the vectors worker, or ``sidecar serve``), so
``sidecar reindex --vectors`` never opens it: it sends these small JSON tasks to the process
that owns it. With a Qdrant server the same path is used, so both modes run one code path.
"""

from __future__ import annotations

from typing import Any

from indexer.adapters import factories
from indexer.adapters.embedding.embedder import model_catalog, model_info
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import VectorIndex
from indexer.core.recipes import recipe
from indexer.pipeline.celery_app import app
from indexer.settings import Settings, get_settings


def _name(
    settings: Settings,
    index: VectorIndex,
    max_tokens: int | None,
    model: str | None,
    text: str | None = None,
) -> dict[str, Any]:
    """The collection (and vector size) of an encoder this process can embed with (None: the
    configured truncation, model, recipe)."""
    catalog = model_catalog(settings.embed_model, settings.embed_models)
    slug = None if model is None else model_info(model).slug
    if slug is not None and slug not in catalog:
        raise ValueError(
            f"the vectors worker cannot embed with {model!r}: restart it (and the API) with "
            f"SIDECAR_EMBED_MODELS including it"
        )
    info = catalog[slug] if slug else next(iter(catalog.values()))
    chosen = None if text is None else recipe(text)
    collection = vt.VectorTargets(index).collection_for(max_tokens, slug, chosen)
    return {"collection": collection, "dim": info.dimension}


def run(op: str, args: dict[str, Any]) -> Any:
    """One operation on this process's vector index (see :mod:`indexer.adapters.qdrant.targets`)."""
    settings = get_settings()
    index = factories.vector_index(settings)
    targets = vt.VectorTargets(index)
    if op == "state":
        return {"members": targets.members(), "base": index.collection}
    if op == "exists":
        return targets.exists(args["collection"])
    if op == "create":
        return targets.create(args["collection"], args.get("dim"))
    if op == "name":
        return _name(
            settings, index, args.get("max_tokens"), args.get("model"), args.get("recipe")
        )
    if op == "drop":
        return targets.drop(args["collection"])
    if op == "aliases":
        return targets.set_aliases(args["read"], args["extra"])
    if op == "counts":
        return targets.point_counts(args["collection"])
    if op == "hashes":
        return targets.point_hashes(args["collection"], args["mailbox_id"])
    raise ValueError(f"unknown vectors admin operation {op!r}")


@app.task(  # type: ignore[untyped-decorator]  # Celery ships no type hints
    name="sidecar.vectors_admin", acks_late=True, reject_on_worker_lost=True
)
def vectors_admin(op: str, args: dict[str, Any]) -> Any:
    return run(op, args)
