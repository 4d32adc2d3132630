"""The broker (Redis) and the tasks on it: queues, batch size, retries and their budgets.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr, model_validator


class PipelineSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Celery broker and results (dead letters are in the sidecar's table): "
        "one server `redis://host:6379/0` (or an ElastiCache replication group's primary "
        "endpoint, whose DNS name follows a failover; `rediss://` for TLS), or Redis "
        "Sentinel as `sentinel://host1:26379;sentinel://host2:26379/0` (every Sentinel, "
        "`;`-separated, the database number once) with `SIDECAR_REDIS_SENTINEL_MASTER`.",
    )
    redis_sentinel_master: str | None = Field(
        default=None,
        description="With a `sentinel://` URL: the name of the master the Sentinels monitor "
        "(their `sentinel monitor <name> ...`); required there, unused otherwise.",
    )
    redis_sentinel_password: SecretStr | None = Field(
        default=None,
        description="With a `sentinel://` URL: the password of the Sentinels themselves "
        "(`requirepass` in their configuration); the master's goes in the URL "
        "(`sentinel://:password@host:26379`).",
    )
    queue_prefix: str = Field(
        default="sidecar",
        description="Queues <prefix>.fulltext and <prefix>.vectors; the dead letters' "
        "partition DLQ#<prefix>.",
    )
    batch_messages: int = Field(default=64, ge=1, le=500, description="Messages per task.")
    vectors_nice: int = Field(
        default=10, ge=0, le=19,
        description="CPU priority steps a worker consuming the vectors queue gives up (nice), "
        "so full-text tasks on a shared host run before embedding; 0 keeps normal priority.",
    )
    max_retries: int = Field(
        default=8, ge=0,
        description="Retries of a batch failing unexpectedly before it is dead-lettered.",
    )
    retry_backoff_max_s: int = Field(
        default=120, description="Cap of the jittered backoff between retries, in seconds."
    )
    # Transient failures (an engine down) are retried this long before dead-lettering.
    transient_retry_budget_s: int = Field(
        default=3600, ge=0,
        description="How long a batch failing transiently (an engine down) is retried, in "
        "seconds; configuration errors (401/403) are retried without a deadline.",
    )
    visibility_timeout_s: int = Field(
        default=900, description="Seconds before a dead worker's unacked task is redelivered."
    )
    purge_rate: float = Field(
        default=1000, ge=0,
        description="Documents (and points) per second `sidecar purge` deletes from each "
        "engine, in small batches, so that purging a large mailbox does not take the engines' "
        "CPU from everyone's searches; 0 = as fast as the engines go.",
    )

    @model_validator(mode="after")
    def _sentinel_needs_a_master(self) -> PipelineSettings:
        if self.redis_sentinel and not self.redis_sentinel_master:
            raise ValueError("a sentinel:// SIDECAR_REDIS_URL needs SIDECAR_REDIS_SENTINEL_MASTER")
        return self

    @property
    def redis_sentinel(self) -> bool:
        """The broker is reached through Redis Sentinel (``sentinel://`` URL)."""
        return self.redis_url.lstrip().lower().startswith("sentinel://")

    @property
    def fulltext_queue(self) -> str:
        return f"{self.queue_prefix}.fulltext"

    @property
    def vectors_queue(self) -> str:
        return f"{self.queue_prefix}.vectors"

    @property
    def contacts_queue(self) -> str:
        """Each full-text batch's contact recounts (``sidecar.contacts``): a queue of their
        own, consumed by the full-text role's thread pool, so that a recount waiting for the
        index's refresh never holds a process a batch could run in."""
        return f"{self.queue_prefix}.contacts"
