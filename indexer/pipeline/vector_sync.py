"""The vectors task's work: sync every vector write target, each with its own encoder (model,
truncation and embedded text, read from the target's name).

Targets are read afresh for every batch (one ``get_aliases``), which is what makes a vector
reindex lose nothing (the argument of :mod:`indexer.ops.reindex` holds as is).
"""

from __future__ import annotations

import time
from collections.abc import Collection

from indexer.adapters import factories
from indexer.adapters.embedding.embedder import Embedder, build_embedder, model_catalog
from indexer.adapters.qdrant import targets as vt
from indexer.core.plan import MessageRef
from indexer.pipeline.sync import Outcome, sync_vectors
from indexer.settings import Settings


def embedder_for(settings: Settings, max_tokens: int, model_slug: str | None = None) -> Embedder:
    """The process's embedder, or one per other (model, truncation): a reindex's target."""
    catalog = model_catalog(settings.embed_model, settings.embed_models)
    spec = catalog[model_slug].spec if model_slug else settings.embed_model
    return build_embedder(settings, max_tokens, spec)


class _Timed:
    """An embedder that adds up the seconds spent in it: the vectors stage's own time (reads,
    cache lookups, store writes) is the task's time less this, and the bench reports both."""

    def __init__(self, inner: Embedder) -> None:
        self._inner, self.seconds = inner, 0.0

    def embed(self, texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        try:
            return self._inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


def sync_vector_targets(settings: Settings, refs: Collection[MessageRef], *,
                        eventual: bool = False) -> Outcome:
    """Sync these messages into every target collection; applied = applied in all of them
    (``eventual``: the first read eventually consistent)."""
    index = factories.vector_index(settings)
    outcome = Outcome()
    slugs = model_catalog(settings.embed_model, settings.embed_models)
    targets = vt.VectorTargets.of(index, slugs, settings.embed_max_tokens)
    for n, collection in enumerate(targets.targets() or [index.collection]):
        encoder = targets.encoder_of(collection)
        embedder = _Timed(embedder_for(settings, encoder.tokens, encoder.slug))
        view = targets.bound(collection)
        part = sync_vectors(factories.store(settings), view, embedder, refs, encoder.recipe,
                            eventual=eventual)
        outcome.poison.update(part.poison)
        outcome.embedded += part.embedded
        outcome.rewritten += part.rewritten
        outcome.embed_s += embedder.seconds
        outcome.applied = set(part.applied) if n == 0 else outcome.applied & part.applied
    outcome.applied -= outcome.poison.keys()
    return outcome
