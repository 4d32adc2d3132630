"""Typed settings, read once per process from ``SIDECAR_*`` environment variables.

Every command builds its clients from one :class:`Settings`, so two stacks (or two tables)
can coexist on one machine by exporting different variables. The fields live in groups, one
module each (AWS, store, OpenSearch, Qdrant, embedding, API, pipeline, observability); a
component that needs one group takes that group's type, and :class:`Settings` — every group
at once, each variable under its unchanged ``SIDECAR_*`` name — is what the composition root
reads and passes down.
"""

from __future__ import annotations

import json
from functools import lru_cache

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from indexer.settings.api import ApiSettings
from indexer.settings.aws import AwsSettings
from indexer.settings.embedding import EmbeddingSettings
from indexer.settings.observability import ObservabilitySettings
from indexer.settings.opensearch import OpenSearchSettings
from indexer.settings.pipeline import PipelineSettings
from indexer.settings.qdrant import QdrantSettings
from indexer.settings.store import StoreSettings

GROUPS: tuple[type, ...] = (StoreSettings, AwsSettings, OpenSearchSettings, QdrantSettings,
                            EmbeddingSettings, PipelineSettings, ApiSettings,
                            ObservabilitySettings)


class Settings(BaseSettings, StoreSettings, AwsSettings, OpenSearchSettings, QdrantSettings,
               EmbeddingSettings, PipelineSettings, ApiSettings, ObservabilitySettings):
    """All knobs of the sidecar, every group at once. Local defaults match
    ``sidecar stack up`` (whose own knobs are the tooling's, not these)."""

    model_config = SettingsConfigDict(env_prefix="SIDECAR_", extra="ignore", frozen=True)


def group_of(field: str) -> type:
    """The group that declares a :class:`Settings` field (the configuration reference's
    sections)."""
    for group in GROUPS:
        if field in group.model_fields:  # type: ignore[attr-defined]
            return group
    raise KeyError(field)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read from the environment once)."""
    return Settings()


def invalid_settings(exc: ValidationError) -> str | None:
    """One line naming each ``SIDECAR_*`` variable a :class:`Settings` refused and why — never
    its value (it may be a secret) — or None when ``exc`` is not about the settings. A
    mistyped variable is the operator's to fix: a one-line answer, not a traceback.
    (The tooling's settings extend :class:`Settings`: their names end the same way.)"""
    if not exc.title.endswith(Settings.__name__):
        return None
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = error.get("loc", ())
        name = f"SIDECAR_{str(where[0]).upper()}" if where else "SIDECAR_* settings"
        problems.append(f"{name}: {error.get('msg', 'invalid')}")
    return "invalid setting " + "; ".join(problems)


def to_env(settings: Settings) -> dict[str, str]:
    """The ``SIDECAR_*`` variables that reproduce these settings in a child process."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump(mode="json").items():
        secret = getattr(settings, name)
        if isinstance(secret, SecretStr):  # the dump masks it; a child process needs it
            value = secret.get_secret_value()
        if value is not None:
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            env[f"SIDECAR_{name.upper()}"] = text
    return env
