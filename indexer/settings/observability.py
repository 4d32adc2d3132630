"""Metrics, logs and progress lines of every process.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints


class ObservabilitySettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of `sidecar tail`'s and `sidecar worker`'s /metrics; 0 = off. "
        "The API serves /metrics on its own port.",
    )
    metrics_host: str = Field(default="127.0.0.1", description="Address the metrics port binds.")
    # Logs (indexer/logs.py reads the variable itself, so logging works before settings load).
    log_level: Annotated[str, StringConstraints(
        strip_whitespace=True, to_lower=True,
        pattern=r"(?i)^(debug|info|warning|error|critical)?$")] = Field(
        default="",
        description="Level of every command's JSON logs (also `sidecar --log-level`); '' = "
        "each command's default (info for tail, serve and workers, warning for the rest).",
    )
    progress_interval_s: float = Field(
        default=15.0, gt=0, le=3600,
        description="Outside a terminal (an ECS task, a Kubernetes Job), seconds between two "
        "JSON progress lines of `backfill`, `ingest`, `reindex` and export polling (done, "
        "total, rate, ETA); in a terminal a progress bar is drawn instead.",
    )
