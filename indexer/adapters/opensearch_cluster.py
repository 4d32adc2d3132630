"""What a cluster changes for the OpenSearch adapter: the shards and replicas of the indices
the sidecar creates, and the copies a bulk write waits for (issue 26).

The numbers travel with the client (:class:`SidecarOpenSearch`, made by
:func:`~indexer.adapters.opensearch.build_client`), like the serverless mode travels with its
signer: every :class:`~indexer.adapters.opensearch.OpenSearchIndex` built from a client — the
pipeline, ``sidecar reindex``, tools and tests — creates its indices alike, and a plain
``OpenSearch`` client gets the mapping files' single-node layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch

__all__ = ["Distribution", "SidecarOpenSearch", "align_replicas", "distribution",
           "with_distribution"]


@dataclass(frozen=True)
class Distribution:
    """Shards and replicas of the indices this client creates, and the copies a bulk write
    waits for (``SIDECAR_OPENSEARCH_SHARDS``/``_REPLICAS``/``_WAIT_FOR_ACTIVE_SHARDS``).
    Carried by the client (like the serverless mode by its signer), so every place that
    builds an :class:`OpenSearchIndex` from a client — the pipeline, reindex, tests, tools —
    creates its indices alike. The default is the mapping files' single node: 1 shard, 0
    replicas."""

    shards: int = 1
    replicas: int = 0
    wait_for_active_shards: str = "1"


class SidecarOpenSearch(OpenSearch):
    """The client :func:`build_client` makes: an ``OpenSearch`` that knows its
    :class:`Distribution`."""

    def __init__(self, distribution: Distribution, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.distribution = distribution


def distribution(client: OpenSearch) -> Distribution:
    """The client's distribution settings; a plain client gets the single-node default."""
    found = getattr(client, "distribution", None)
    return found if isinstance(found, Distribution) else Distribution()


def with_distribution(template: Mapping[str, Any], spread: Distribution) -> dict[str, Any]:
    """A mapping file's template body with these shards and replicas."""
    settings = {**template.get("settings", {}), "number_of_shards": spread.shards,
                "number_of_replicas": spread.replicas}
    return {**template, "settings": settings}


def align_replicas(call: Callable[..., Any], client: OpenSearch, indices: Sequence[str]) -> None:
    """Existing indices take the configured replica count: a live change (unlike the shard
    count, which only a reindex changes), so raising replicas needs no reindex. ``call`` is
    the adapter's error-classifying wrapper."""
    if not indices:
        return
    wanted = str(distribution(client).replicas)
    found = call(client.indices.get_settings, index=",".join(indices),
                 name="index.number_of_replicas")
    stale = [name for name, body in found.items()
             if body["settings"]["index"]["number_of_replicas"] != wanted]
    if stale:
        call(client.indices.put_settings, index=",".join(stale),
             body={"index": {"number_of_replicas": int(wanted)}})
