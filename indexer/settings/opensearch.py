"""The OpenSearch domain, collection or node: where, how it authenticates, and how the
message index is laid out (shards, replicas, refresh).

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class OpenSearchSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    opensearch_url: str = Field(
        default="http://127.0.0.1:9200",
        description="OpenSearch endpoint, or several nodes of one cluster as a comma list "
        "(http://a:9200,http://b:9200): the client spreads requests over them and retries "
        "another node when one is unreachable. Production: every data/coordinating node, or "
        "one load-balanced endpoint (a domain).",
    )
    opensearch_shards: int = Field(
        default=1, ge=1, le=1024,
        description="number_of_shards of each new index (template, reindex targets); a change "
        "applies to the next `sidecar reindex`. Production: about one shard per 10-50 GB of "
        "index, at least one per data node that should share the writes.",
    )
    opensearch_replicas: int = Field(
        default=0, ge=0, le=16,
        description="number_of_replicas of each new index, applied to existing ones too when "
        "the template is put. Keep 0 on one node (a replica never allocates there: the index "
        "stays yellow). Production: 1 (2+ data nodes): a data node lost keeps every shard "
        "searchable and writable.",
    )
    opensearch_wait_for_active_shards: str = Field(
        default="1", pattern=r"^(all|[1-9][0-9]*)$",
        description="Copies of a shard that must be active before a bulk write proceeds (1 = "
        "the primary; all = every copy). Production: 1 with replicas 1 (writes continue while "
        "a node is down; every in-sync copy still gets each write before it is acknowledged); "
        "2 refuses writes (retried as transient) while only one copy is left.",
    )
    opensearch_refresh_interval: str = Field(
        default="500ms", pattern=r"^[1-9][0-9]*(ms|s)$",
        description="How often new writes become searchable: index.refresh_interval of each "
        "new index, applied to existing ones too when the template is put (set it alike on "
        "every role). Each refresh makes a segment of what arrived since the last: shorter is "
        "fresher and leaves more small segments to merge. 500ms halves the wait for the next "
        "refresh against OpenSearch's 1s at no bulk throughput measured (docs/results/runs/).",
    )
    opensearch_index: str = Field(
        default="mail", description="Alias readers use; also the index-family prefix."
    )
    opensearch_auth: Literal["none", "basic", "sigv4"] = Field(
        default="none", description="none | basic (username/password) | sigv4 (AWS IAM)."
    )
    opensearch_aws_service: Literal["es", "aoss"] = Field(
        default="es", description="SigV4 service: es = a Service domain, aoss = Serverless."
    )
    opensearch_visible_timeout_s: float = Field(
        default=30.0, gt=0, le=600,
        description="aoss only: how long a refresh waits for acknowledged writes to become "
        "searchable (collections have no _refresh) before failing as transient.",
    )
    opensearch_username: str | None = Field(default=None, description="Basic auth user.")
    opensearch_password: SecretStr | None = Field(
        default=None, description="Basic auth; never logged."
    )
    opensearch_verify_certs: bool = Field(default=True, description="Verify the TLS certificate.")
    opensearch_ca_certs: Path | None = Field(default=None, description="CA bundle (a private CA).")
    opensearch_pool_size: int = Field(
        default=32, ge=1, le=512,
        description="Connections kept open to each OpenSearch host (size it to the process's "
        "concurrency: the API's request threads, a worker's bulk threads).",
    )

    @property
    def opensearch_hosts(self) -> list[str]:
        """The nodes of ``opensearch_url`` (one URL, or a comma list of them)."""
        return [h.strip() for h in self.opensearch_url.split(",") if h.strip()]
