"""The vector store: the embedded Edge shard (a path) or a Qdrant server (a URL), the
collection prefix and a cluster's layout.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr


class QdrantSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    qdrant_url: str | None = Field(default=None, description="A Qdrant server; unset = embedded.")
    qdrant_path: Path = Field(default=Path(".sidecar/qdrant"), description="Embedded Qdrant store.")
    qdrant_collection: str = Field(default="mail", description="Prefix of the collection alias.")
    qdrant_shard_number: int | None = Field(
        default=None, ge=1, description="Shards of each new collection (a cluster); unset = 1."
    )
    qdrant_replication_factor: int | None = Field(
        default=None, ge=1,
        description="Copies of each shard (a cluster); unset = 1. Production: 2 on 3+ nodes "
        "(a node lost keeps every shard readable and writable).",
    )
    qdrant_write_consistency_factor: int | None = Field(
        default=None, ge=1,
        description="Replicas that must acknowledge a write (a cluster); unset = 1. "
        "Production: 1 with replication 2 (writes continue while a node is down); the embedded "
        "store ignores it, like shards and replication.",
    )
    qdrant_read_consistency: str | None = Field(
        default=None, pattern=r"^(all|majority|quorum|[1-9][0-9]*)$",
        description="Replicas the API's vector searches ask (all, majority, quorum or a "
        "number); unset = 1, the server's default: the fastest, and it keeps answering while a "
        "replica is down. Production: unset, or majority when reads must see every write.",
    )
    qdrant_api_key: SecretStr | None = Field(
        default=None, description="API key of a secured Qdrant server (or Qdrant Cloud); secret."
    )
    qdrant_prefer_grpc: bool = Field(
        default=False, description="Talk to the Qdrant server over gRPC (its gRPC port) not HTTP."
    )
    qdrant_grpc_port: int = Field(
        default=6334, ge=1, le=65535, description="The server's gRPC port."
    )
    qdrant_optimize_after: int = Field(
        default=20_000, ge=1,
        description="Embedded store: optimize a collection in the background after this many "
        "points were written to it.",
    )

    @property
    def qdrant_embedded(self) -> bool:
        return not self.qdrant_url

    @property
    def qdrant_layout(self) -> dict[str, int]:
        """``create_collection`` arguments for a Qdrant cluster (the embedded store ignores
        them); only those set, so the server's defaults apply to the rest."""
        layout = {
            "shard_number": self.qdrant_shard_number,
            "replication_factor": self.qdrant_replication_factor,
            "write_consistency_factor": self.qdrant_write_consistency_factor,
        }
        return {k: v for k, v in layout.items() if v is not None}
