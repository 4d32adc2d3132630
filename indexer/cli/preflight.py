"""The start-up check of every runtime command: its configuration can work and the tables
it needs exist — or one line on stderr saying what is wrong and how to fix it (exit 2)."""

from __future__ import annotations

import sys

import typer

from indexer.settings import Settings


def _fail(message: str) -> typer.Exit:
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(2)


def check_config(settings: Settings) -> None:
    """AWS region and OpenSearch authentication settings (no network call)."""
    from indexer.adapters.aws.clients import AwsConfigError
    from indexer.adapters.aws.clients import session as aws_session
    from indexer.adapters.opensearch.auth import OpenSearchConfigError, client_options

    try:
        aws_session(settings)
        client_options(settings)
    except (AwsConfigError, OpenSearchConfigError) as exc:
        raise _fail(str(exc)) from None


def require_tables(settings: Settings, *, mail: bool = True, state: bool = True) -> None:
    """The configuration, then the tables: stop with a one-line error when one is missing."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.dynamodb.tables import MissingTableError, needed, require

    check_config(settings)
    try:
        require(aws.client(settings, "dynamodb"), needed(settings, mail=mail, state=state))
    except MissingTableError as exc:
        raise _fail(str(exc)) from None


def require_encoder(settings: Settings) -> None:
    """The roles that embed (vectors workers, the API) need the encoder of
    ``SIDECAR_EMBED_RUNTIME``, which the base distribution does not install: without it, one
    line naming the extra (``[vectors]`` for onnx, ``[torch]``) instead of an ImportError in
    the middle of the first batch."""
    from indexer.adapters.embedding.embedder import encoder_problem

    for spec in dict.fromkeys((settings.embed_model, *settings.embed_models)):
        problem = encoder_problem(settings.embed_runtime, spec, settings.embed_onnx_dir)
        if problem:
            raise _fail(problem)
