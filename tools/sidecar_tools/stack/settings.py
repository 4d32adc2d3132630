"""The local stack's own knobs (`sidecar stack`, the demo, the benches): where its files
live, moto's port and the OpenSearch node's heap. They are the tooling's, not the
sidecar's: no runtime process reads them. Same ``SIDECAR_*`` names as before."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field

from indexer.settings import Settings


class StackSettings(Settings):
    """:class:`~indexer.settings.Settings` plus the local stack's knobs."""

    state_dir: Path = Field(
        default=Path(".sidecar"),
        description="Local stack only (tooling): logs, pid files, data.",
    )
    moto_port: int = Field(default=5000, description="Local stack only: the moto server's port.")
    opensearch_heap: str = Field(
        default="512m", description="Local stack only: the OpenSearch node's heap."
    )


@lru_cache(maxsize=1)
def get_stack_settings() -> StackSettings:
    """The tooling's process-wide settings (read from the environment once)."""
    return StackSettings()
