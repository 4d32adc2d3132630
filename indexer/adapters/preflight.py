"""The start-up checks every runtime role makes before it touches an engine: its
configuration can work, the tables it needs exist, the encoder it needs is installed. Each
answers with the one line that says what is wrong and how to fix it (None: fine); the
commands print it and exit 2 (:mod:`indexer.cli.preflight`, :mod:`search_api.cli`)."""

from __future__ import annotations

from indexer.settings import Settings


def config_problem(settings: Settings) -> str | None:
    """AWS region and OpenSearch authentication settings (no network call)."""
    from indexer.adapters.aws.clients import AwsConfigError
    from indexer.adapters.aws.clients import session as aws_session
    from indexer.adapters.opensearch.auth import OpenSearchConfigError, client_options

    try:
        aws_session(settings)
        client_options(settings)
    except (AwsConfigError, OpenSearchConfigError) as exc:
        return str(exc)
    return None


def tables_problem(settings: Settings, *, mail: bool = True, state: bool = True) -> str | None:
    """The configuration, then the tables this role reads."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.dynamodb.tables import MissingTableError, needed, require

    problem = config_problem(settings)
    if problem:
        return problem
    try:
        require(aws.client(settings, "dynamodb"), needed(settings, mail=mail, state=state))
    except MissingTableError as exc:
        return str(exc)
    return None


def encoder_missing(settings: Settings) -> str | None:
    """The roles that embed (vectors workers, the API) need the encoder of
    ``SIDECAR_EMBED_RUNTIME``, which the base distribution does not install: without it, one
    line naming the extra (``[vectors]`` for onnx, ``[torch]``) instead of an ImportError in
    the middle of the first batch."""
    from indexer.adapters.embedding.embedder import encoder_problem, with_precision

    for model in dict.fromkeys((settings.embed_model, *settings.embed_models)):
        # the configured precision's graph (int8 by default), and the float32 one a
        # collection made before may still be written and searched with
        for spec in dict.fromkeys((with_precision(model, settings.embed_precision), model)):
            problem = encoder_problem(settings.embed_runtime, spec, settings.embed_onnx_dir)
            if problem:
                return problem
    return None
