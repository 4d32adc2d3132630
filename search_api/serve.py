"""``sidecar serve``: the API, and — with the embedded Qdrant store — its single owner.

The embedded store admits one process. With a Qdrant server (``SIDECAR_QDRANT_URL``) the API
is a plain uvicorn process and vectors workers run anywhere. In embedded mode the API process
is also the vectors consumer: the Celery worker (solo pool) runs in the main thread and
uvicorn in a second thread, both using the same cached Qdrant client; run
``sidecar worker --role fulltext`` beside it. Further API replicas on the same host run with
``--no-vectors-consumer``: they serve full text and never open the store.
"""

from __future__ import annotations

import logging
import threading

import uvicorn

from indexer.logs import configure
from indexer.settings import Settings
from search_api.app import create_app


def _server(settings: Settings, host: str, port: int, *, vectors: bool) -> uvicorn.Server:
    app = create_app(settings, vectors=vectors)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
    return uvicorn.Server(config)


def serve(settings: Settings, host: str, port: int, *, vectors_consumer: bool) -> None:
    """Embedded store without ``vectors_consumer``: an API replica beside the owner that never
    opens the store (full text only; vector modes answer 503)."""
    configure(logging.INFO, "search_api")
    server = _server(settings, host, port, vectors=vectors_consumer or not settings.qdrant_embedded)
    if not (settings.qdrant_embedded and vectors_consumer):
        server.run()
        return
    thread = threading.Thread(target=server.run, name="api", daemon=True)
    thread.start()
    from indexer.pipeline.celery_app import app

    try:
        app.worker_main(
            [
                "worker",
                "-P",
                "solo",
                "-Q",
                settings.vectors_queue,
                "-n",
                "api-vectors@%h",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "WARNING",
            ]
        )
    finally:
        server.should_exit = True
        thread.join(10)
