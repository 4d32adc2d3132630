"""``sidecar serve``: the API, and — with the embedded Qdrant store — its single owner.

The embedded store admits one process. With a Qdrant server (``SIDECAR_QDRANT_URL``) the API
is a plain uvicorn process and vectors workers run anywhere. In embedded mode the API process
is also the vectors consumer: the consumer the serve command passes (the Celery worker, solo
pool) runs in the main thread and uvicorn in a second thread, both using the same cached
Qdrant client; run ``sidecar worker --role fulltext`` beside it. Further API replicas on the
same host run with ``--no-vectors-consumer``: they serve full text and never open the store.

This module knows the pipeline only through what it is given (``repairs``,
``consume_vectors``): ``search_api`` never imports ``indexer.pipeline``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import uvicorn

from indexer.logs import configure
from indexer.settings import Settings
from search_api.app import create_app
from search_api.repair import RepairSink


def _server(
    settings: Settings, host: str, port: int, *, vectors: bool, repairs: RepairSink | None
) -> uvicorn.Server:
    app = create_app(settings, vectors=vectors, repairs=repairs)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    return uvicorn.Server(config)


def serve(
    settings: Settings,
    host: str,
    port: int,
    *,
    vectors_consumer: bool,
    repairs: RepairSink | None = None,
    consume_vectors: Callable[[], None] | None = None,
) -> None:
    """Embedded store without ``vectors_consumer``: an API replica beside the owner that never
    opens the store (full text only; vector modes answer 503)."""
    configure(logging.INFO, "search_api")
    vectors = vectors_consumer or not settings.qdrant_embedded
    server = _server(settings, host, port, vectors=vectors, repairs=repairs)
    if not (settings.qdrant_embedded and vectors_consumer and consume_vectors):
        server.run()
        return
    thread = threading.Thread(target=server.run, name="api", daemon=True)
    thread.start()
    try:
        consume_vectors()
    finally:
        server.should_exit = True
        thread.join(10)
