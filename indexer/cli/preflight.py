"""The start-up check of every runtime command (:mod:`indexer.adapters.preflight`): one line
on stderr saying what is wrong and how to fix it (JSON outside a terminal), exit 2 — or
nothing."""

from __future__ import annotations

import typer

from indexer import logs
from indexer.adapters import preflight
from indexer.settings import Settings


def stop_on(problem: str | None) -> None:
    """Exit 2 with ``error: <problem>`` on stderr (a JSON line outside a terminal) when there
    is a problem."""
    if problem:
        logs.refuse(problem)
        raise typer.Exit(2)


def check_config(settings: Settings) -> None:
    """AWS region and OpenSearch authentication settings (no network call)."""
    stop_on(preflight.config_problem(settings))


def require_tables(settings: Settings, *, mail: bool = True, state: bool = True) -> None:
    """The configuration, then the tables: stop when one is missing."""
    stop_on(preflight.tables_problem(settings, mail=mail, state=state))


def require_encoder(settings: Settings) -> None:
    """The encoder of ``SIDECAR_EMBED_RUNTIME`` is installed."""
    stop_on(preflight.encoder_missing(settings))
