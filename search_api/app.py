"""FastAPI application: routes are thin; errors are mapped to HTTP in one place."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from indexer.adapters.broker import queue_registry
from indexer.metrics import API_LATENCY
from indexer.settings import Settings, get_settings
from search_api import console
from search_api.auth import TokenTable
from search_api.backends import Backends, BackendUnavailable
from search_api.cursor import CursorCodec, CursorError
from search_api.query import QueryError
from search_api.repair import NoRepairs, RepairSink
from search_api.routes import router

log = logging.getLogger("search_api")
MODES = frozenset({"fulltext", "semantic", "hybrid"})

DESCRIPTION = """Search one mailbox at a time (Bearer token; each token may read a set of
mailboxes). `q` syntax: free terms (all must match), `"exact phrase"`, `OR` (binds tighter
than the implicit AND: `a b OR c` = `a AND (b OR c)`), `-term` / `-op:value` negation,
parentheses, `from:` / `to:` / `cc:` (address, local part, domain or a display-name word),
`subject:` (word or `"phrase"`), `thread:<thread_key>`, `after:` / `before:` (`2024-01-31` or
`2024/01/31`, whole UTC days, inclusive), `has:attachment`, and `prefix*` (also `from:Mik*`).
Examples: `from:alice@example.com budget`, `subject:"release plan" -draft`,
`(outage OR incident) after:2024/03/01 has:attachment`."""


def create_app(
    settings: Settings | None = None,
    *,
    vectors: bool = True,
    repairs: RepairSink | None = None,
) -> FastAPI:
    """``vectors=False``: a replica that never opens the Qdrant store (see ``Backends``).
    ``repairs``: where stale hits are sent (``sidecar serve`` wires the pipeline's queues;
    unset, they are only logged). The model loads in the background at start; ``/readyz``
    answers 503 until it has."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backends = Backends(settings, serves_vectors=vectors, repairs=repairs or NoRepairs())
        app.state.backends = backends
        threading.Thread(target=_load_model, args=(backends,), name="model", daemon=True).start()
        app.state.tokens = TokenTable.from_settings(settings)
        key = settings.cursor_key
        app.state.cursors = CursorCodec(key.get_secret_value() if key else None)
        yield
        app.state.backends.close()

    dev = settings.env == "dev"  # /docs and /redoc load their assets from a CDN: dev only
    app = FastAPI(
        title="mail-search-sidecar",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs" if dev else None,
        redoc_url="/redoc" if dev else None,
    )
    app.include_router(router)
    if settings.console_enabled:
        console.mount(app)
    _metrics(app, settings)
    _errors(app)
    app.middleware("http")(_access_log)
    return app


def _load_model(backends: Backends, attempts: int = 3) -> None:
    """A few tries: a failed load (e.g. CPython 3.11's race when two threads compile code at
    once) must not leave ``/readyz`` at 503 for good; a semantic request also retries."""
    for attempt in range(1, attempts + 1):
        try:
            backends.load_model()
            return
        except Exception:
            log.exception("loading the embedding model failed (attempt %d/%d)", attempt, attempts)
            time.sleep(1.0)


def _errors(app: FastAPI) -> None:
    @app.exception_handler(QueryError)
    async def bad_query(_: Request, exc: QueryError) -> JSONResponse:
        return JSONResponse({"detail": exc.message, "position": exc.position}, status_code=400)

    @app.exception_handler(CursorError)
    async def bad_cursor(_: Request, exc: CursorError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def bad_params(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": e.get("loc"), "msg": e.get("msg")} for e in exc.errors()]
        return JSONResponse({"detail": "invalid parameters", "errors": errors}, status_code=400)

    @app.exception_handler(BackendUnavailable)
    async def unavailable(_: Request, exc: BackendUnavailable) -> JSONResponse:
        return JSONResponse(
            {"detail": f"{exc.component} is unavailable"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return JSONResponse({"detail": "internal error"}, status_code=500)


def _metrics(app: FastAPI, settings: Settings) -> None:
    """``GET /metrics`` on the API's port, without a token: counters, latencies and queue
    depths only (no mail content, mailbox ids or message keys ever become labels)."""
    queues = queue_registry(settings)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        body = generate_latest(REGISTRY) + generate_latest(queues)
        return Response(body, media_type=CONTENT_TYPE_LATEST)


async def _access_log(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """One line and one latency sample per request — route template, status, latency, result
    count, never the token — 500s included: an error no handler answered is turned into the
    500 here, inside the log, instead of in Starlette's outermost error middleware (which no
    middleware sees). Every answer is ``Cache-Control: no-store`` (mail must not be cached)."""
    started = time.perf_counter()
    try:
        response = await call_next(request)
    except Exception:
        log.exception("unhandled error on %s", request.url.path)
        response = JSONResponse({"detail": "internal error"}, status_code=500)
    response.headers["Cache-Control"] = "no-store"
    elapsed = time.perf_counter() - started
    matched = getattr(request.scope.get("route"), "path", None)
    route = matched or request.url.path
    mode = request.query_params.get("mode")
    API_LATENCY.labels(
        matched or "<unmatched>",  # raw paths would be unbounded label values
        mode if mode in MODES else "",
        str(response.status_code),
    ).observe(elapsed)
    log.info(
        "request",
        extra={
            "method": request.method,
            "route": route,
            "status": response.status_code,
            "latency_ms": round(elapsed * 1000, 1),
            "results": getattr(request.state, "results", None),
            "mode": mode,
        },
    )
    return response
