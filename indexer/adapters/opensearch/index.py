"""OpenSearch's door: one client per process, and the message index family with its three
faces — :class:`~.admin.IndexAdmin` for ops, :class:`~.reads.IndexReads` for the API,
:class:`~.writes.IndexWrites` for the workers — over that one client. Callers that need one
face type against it; the composition root builds :class:`OpenSearchIndex` once.
"""

from __future__ import annotations

from opensearchpy import OpenSearch

from indexer.adapters.opensearch.auth import client_options
from indexer.adapters.opensearch.cluster import Distribution, SidecarOpenSearch
from indexer.adapters.opensearch.reads import IndexReads
from indexer.adapters.opensearch.writes import IndexWrites
from indexer.settings import Settings


def build_client(settings: Settings) -> OpenSearch:
    """One client per process, from settings (auth and TLS: :mod:`.auth`).

    ``pool_maxsize``: urllib3 keeps one connection per host unless told otherwise, so
    concurrent requests beyond it opened (and, on a domain, TLS- and SigV4-handshook) a
    connection each and dropped it after ("connection pool is full"). A timeout is never
    retried by the client: a search that timed out would cost the engine the same again, and
    a bulk write that timed out is retried by its task, with backoff.

    Several hosts (``SIDECAR_OPENSEARCH_URL`` as a comma list): requests go round-robin; a
    node that refuses or drops a connection is marked dead for a while and the request is
    sent to the next one (``max_retries``), so a lost node costs a retry, not an error.
    """
    return SidecarOpenSearch(
        Distribution(settings.opensearch_shards, settings.opensearch_replicas,
                     settings.opensearch_wait_for_active_shards,
                     settings.opensearch_refresh_interval),
        hosts=settings.opensearch_hosts,
        timeout=30,
        max_retries=2,
        retry_on_timeout=False,
        pool_maxsize=settings.opensearch_pool_size,
        http_compress=False,
        **client_options(settings),
    )


class OpenSearchIndex(IndexWrites, IndexReads):
    """The message index family behind one alias, every face of it (``serverless``: the
    client talks to a Serverless collection, see :mod:`.flavour`)."""
