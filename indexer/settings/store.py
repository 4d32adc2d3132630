"""The mail store the sidecar follows and the sidecar's own table: names, how the first read
of a message is made, exports it requests, and how long dead letters are kept.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class StoreSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    table: str = Field(default="aecs-mail", description="The mail store's DynamoDB table.")
    state_table: str = Field(
        default="",
        description="Sidecar-owned table (participants, checkpoints); '' = '<table>-sidecar'.",
    )
    first_read: Literal["eventual", "strong"] = Field(
        default="eventual",
        description="A worker's first read of a message's mail items: eventual costs half "
        "the read units; the strong read after each write still catches a stale one, at one "
        "more round (sidecar_sync_rewritten_total counts them). A backfill's is always "
        "eventual.",
    )
    # Exports the sidecar requests itself (`sidecar backfill --export`).
    export_bucket: str | None = Field(
        default=None, description="S3 bucket DynamoDB exports the table to (`--bucket`)."
    )
    export_prefix: str = Field(
        default="sidecar-exports", description="Key prefix of those exports in the bucket."
    )
    dlq_ttl_days: int = Field(
        default=30, ge=1, description="Days a dead-letter entry is kept before it expires."
    )

    @property
    def resolved_state_table(self) -> str:
        """The sidecar's own table: explicit, or derived from the mail table's name."""
        return self.state_table or f"{self.table}-sidecar"
