"""What a cluster changes for the OpenSearch adapter: the shards, replicas and refresh interval
of the indices the sidecar creates, and the copies a bulk write waits for (issue 26).

The numbers travel with the client (:class:`SidecarOpenSearch`, made by
:func:`~indexer.adapters.opensearch.index.build_client`), like the serverless mode travels with its
signer: every :class:`~indexer.adapters.opensearch.index.OpenSearchIndex` built from a client — the
pipeline, ``sidecar reindex``, tools and tests — creates its indices alike, and a plain
``OpenSearch`` client gets the mapping files' single-node layout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch

__all__ = ["Distribution", "SidecarOpenSearch", "align_settings", "distribution",
           "with_distribution"]


@dataclass(frozen=True)
class Distribution:
    """Shards and replicas of the indices this client creates, and the copies a bulk write
    waits for (``SIDECAR_OPENSEARCH_SHARDS``/``_REPLICAS``/``_WAIT_FOR_ACTIVE_SHARDS``).
    Carried by the client (like the serverless mode by its signer), so every place that
    builds an :class:`OpenSearchIndex` from a client — the pipeline, reindex, tests, tools —
    creates its indices alike. The default is the mapping files' single node (1 shard, 0
    replicas) refreshed every half second, ``SIDECAR_OPENSEARCH_REFRESH_INTERVAL``'s default."""

    shards: int = 1
    replicas: int = 0
    wait_for_active_shards: str = "1"
    refresh_interval: str = "500ms"


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
    """A mapping file's template body with these shards, replicas and refresh interval."""
    settings = {**template.get("settings", {}), "number_of_shards": spread.shards,
                "number_of_replicas": spread.replicas,
                "refresh_interval": spread.refresh_interval}
    return {**template, "settings": settings}


def align_settings(call: Callable[..., Any], client: OpenSearch, indices: Sequence[str]) -> None:
    """Existing indices take the configured replica count and refresh interval: live changes
    (unlike the shard count, which only a reindex changes), so neither needs a reindex.
    ``call`` is the adapter's error-classifying wrapper."""
    if not indices:
        return
    spread = distribution(client)
    wanted = {"number_of_replicas": str(spread.replicas),
              "refresh_interval": spread.refresh_interval}
    found = call(client.indices.get_settings, index=",".join(indices),
                 name="index.number_of_replicas,index.refresh_interval")
    for name, body in found.items():
        have = body["settings"]["index"]
        changed = {key: value for key, value in wanted.items() if have.get(key) != value}
        if changed:
            call(client.indices.put_settings, index=name, body={"index": changed})
