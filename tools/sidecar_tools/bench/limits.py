"""The two ceilings the pipeline is held against: raw encoding and raw ``_bulk``.

Both run in the benchmark's own process on the very inputs the pipeline handles (the distinct
``forai`` texts; the documents the pipeline wrote), so the ratios isolate the pipeline's own
overhead: reading the table, queues, verification, Qdrant writes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch, helpers

from indexer.adapters.embedding.embedder import Embedder
from indexer.adapters.opensearch.index import OpenSearchIndex
from sidecar_tools.bench.timing import rate


@dataclass
class Throughput:
    items: int
    seconds: float

    @property
    def per_s(self) -> float:
        return rate(self.items, self.seconds)

    def as_json(self) -> dict[str, Any]:
        return {"items": self.items, "seconds": round(self.seconds, 3), "per_s": self.per_s}


def encoder_limit(embedder: Embedder, texts: Sequence[str], batch: int) -> Throughput:
    """Texts/s of ``embedder.embed`` over ``texts`` in the worker's batch size (one warm-up
    call first, so model initialisation is not counted)."""
    if not texts:
        return Throughput(0, 0.0)
    embedder.embed(list(texts[:2]))
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed(list(texts[i : i + batch]))
    return Throughput(len(texts), time.perf_counter() - started)


def written_documents(client: OpenSearch, alias: str) -> list[dict[str, Any]]:
    """Every document of ``alias`` as it was written: id, routing, source."""
    client.indices.refresh(index=alias)
    return [
        {"_id": hit["_id"], "routing": hit.get("_routing"), "_source": hit["_source"]}
        for hit in helpers.scan(client, index=alias, query={"query": {"match_all": {}}}, size=1000)
    ]


def bulk_limit(client: OpenSearch, alias: str, docs: list[dict[str, Any]]) -> Throughput:
    """Docs/s of ``helpers.streaming_bulk`` into a fresh index of the same template, with the
    pipeline's chunking; the index is dropped afterwards."""
    index = OpenSearchIndex(client, alias)
    name = index.ensure()
    actions = ({"_op_type": "index", "_index": name, **d} for d in docs)
    try:
        started = time.perf_counter()
        failed = sum(
            not ok
            for ok, _ in helpers.streaming_bulk(
                client,
                actions,
                chunk_size=500,
                max_chunk_bytes=20 * 1024 * 1024,
                raise_on_error=False,
                max_retries=3,
            )
        )
        elapsed = time.perf_counter() - started
    finally:
        drop_index(client, alias)
    if failed:
        raise RuntimeError(f"bulk limit: {failed} document(s) rejected")
    return Throughput(len(docs), elapsed)


def drop_index(client: OpenSearch, alias: str) -> None:
    """Remove an alias's index family and its templates (benchmark namespaces only)."""
    client.indices.delete(index=f"{alias}-v*", ignore_unavailable=True, allow_no_indices=True)
    found = client.indices.get_index_template(name=f"{alias}-messages*", ignore=[404])
    for template in found.get("index_templates", []):
        client.indices.delete_index_template(name=template["name"])
