"""CLI: ``sidecar serve`` — the API's composition root: the settings, the pipeline's
read-repair queues and (embedded Qdrant) the vectors consumer wired into :mod:`.serve`.

Registered on the ``sidecar`` command through the ``mail_search_sidecar.commands`` entry point
group (``pyproject.toml``), like the tooling's commands, so the indexer's CLI never imports the
API (it sits below it)."""

from __future__ import annotations

from typing import Annotated

import typer

from indexer import logs
from indexer.adapters.preflight import config_problem, encoder_missing
from indexer.settings import get_settings


def serve(
    host: Annotated[str | None, typer.Option(help="Default: SIDECAR_API_HOST (127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Default: SIDECAR_API_PORT (8080).")] = None,
    vectors_consumer: Annotated[
        bool, typer.Option(
            help="Embedded Qdrant only: also consume the vectors queue (the store's owner). "
            "--no-vectors-consumer: an API replica that never opens the store (full text; "
            "semantic, hybrid and similar answer 503)."
        )
    ] = True,
    metrics_port: Annotated[
        int | None, typer.Option(
            help="Serve the API's /metrics on this port, never the API's own "
            "(default: SIDECAR_API_METRICS_PORT, 9108; 0 off)."
        )
    ] = None,
) -> None:
    """Serve the search API (OpenAPI at /openapi.json)."""
    from indexer.pipeline.repair import CeleryRepairs, consume_vectors
    from search_api.serve import serve as run

    settings = get_settings()
    # Not the tables: /readyz names a missing one (the API may start first). The encoder: it
    # embeds queries.
    problem = config_problem(settings) or encoder_missing(settings)
    if problem:
        logs.refuse(problem)
        raise typer.Exit(2)
    run(
        settings,
        host or settings.api_host,
        port or settings.api_port,
        vectors_consumer=vectors_consumer,
        repairs=CeleryRepairs(settings),  # read-repair through the pipeline's queues
        consume_vectors=lambda: consume_vectors(settings),
        metrics_port=metrics_port,
    )


def register(app: typer.Typer) -> None:
    app.command()(serve)
