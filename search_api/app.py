"""FastAPI application: routes are thin; errors are mapped to HTTP in one place.

:func:`answer_error` is that place: a query or cursor to fix is a 400, invalid parameters are
a 400 too (never FastAPI's 422, which the OpenAPI document therefore does not list), a
message the mailbox lacks a 404, and any of the core's
:class:`~indexer.core.errors.TransientError` family — an engine down, or one that refused the
sidecar's credentials — is a 503 naming the engine where it is known. Nothing on the way
wraps an error for it. Their
bodies are built from :mod:`search_api.models`, the same models the document shows."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from indexer import logs, otel
from indexer.core.errors import ConfigurationError, PoisonError, TransientError
from indexer.metrics import API_LATENCY
from indexer.settings import Settings, get_settings
from search_api import console
from search_api.auth import Authenticator
from search_api.backends import Backends
from search_api.cursor import CursorCodec, CursorError
from search_api.models import BadRequest, ParamError, Problem
from search_api.query import QueryError
from search_api.repair import NoRepairs, RepairSink
from search_api.routes import router
from search_api.service import MODES, NotFound

log = logging.getLogger("search_api")

DESCRIPTION = """Search one mailbox at a time (Bearer token; each token may read a set of
mailboxes). `q` syntax: free terms (all must match), `"exact phrase"`, `OR` (binds tighter
than the implicit AND: `a b OR c` = `a AND (b OR c)`), `-term` / `-op:value` negation,
parentheses, `from:` / `to:` / `cc:` (address, local part, domain or a display-name word),
`subject:` (word or `"phrase"`), `thread:<thread_key>`, `after:` / `before:` (`2024-01-31` or
`2024/01/31`, whole UTC days, inclusive), `has:attachment`, and `prefix*` (also `from:Mik*`).
Examples: `from:alice@example.com budget`, `subject:"release plan" -draft`,
`(outage OR incident) after:2024/03/01 has:attachment`."""
TAGS = [
    {"name": "search", "description": "Searches and similar messages of one mailbox."},
    {"name": "health", "description": "Liveness and readiness probes (no token)."},
]


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
        app.state.tokens = Authenticator.from_settings(settings)
        key = settings.cursor_key
        app.state.cursors = CursorCodec(key.get_secret_value() if key else None)
        yield
        app.state.backends.close()

    dev = settings.env == "dev"  # /docs and /redoc load their assets from a CDN: dev only
    app = FastAPI(
        title="mail-search-sidecar",
        version=version("mail-search-sidecar"),  # the package's, as a client generator reads it
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        docs_url="/docs" if dev else None,
        redoc_url="/redoc" if dev else None,
        # No redirect to the path with(out) a trailing slash: Starlette builds its Location
        # from the request's Host header, which the caller chooses.
        redirect_slashes=False,
    )
    app.include_router(router)
    if settings.console_enabled:
        console.mount(app)
    _errors(app)
    app.openapi = _without_422(app.openapi)  # type: ignore[method-assign]
    app.middleware("http")(_access_log)
    otel.instrument_app(app)  # a server span per request, where tracing is on
    return app


def _without_422(openapi: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """FastAPI's document less its 422: every route with parameters gets one, but this API
    answers invalid parameters with 400 (``BadRequest``, see ``bad_params``), so a 422 there
    would be a status no client ever sees (FastAPI's "extending OpenAPI" way; FastAPI caches
    the document, so after the first call there is nothing left to remove)."""

    def document() -> dict[str, Any]:
        schema = openapi()
        for operations in schema["paths"].values():
            for operation in operations.values():
                operation["responses"].pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema

    return document


def _load_model(backends: Backends, attempts: int = 3) -> None:
    """A few tries: a failed load (e.g. CPython 3.11's race when two threads compile code at
    once) must not leave ``/readyz`` at 503 for good; a semantic request also retries. A
    replica that never opens the vector store embeds nothing: no model."""
    if not backends.serves_vectors:
        return
    for attempt in range(1, attempts + 1):
        try:
            backends.encoder.load_model()
            return
        except Exception:
            log.exception("loading the embedding model failed (attempt %d/%d)", attempt, attempts)
            time.sleep(1.0)


CORE_ERRORS: tuple[type[Exception], ...] = (
    QueryError, CursorError, PoisonError, RequestValidationError, NotFound, TransientError
)


def _errors(app: FastAPI) -> None:
    """One handler for the core's error kinds (:func:`answer_error`), one for the rest."""
    for kind in CORE_ERRORS:
        app.add_exception_handler(kind, answer_error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", _route(request) or "<unmatched>")
        return _answer(500, Problem(detail="internal error"))


async def answer_error(request: Request, exc: Exception) -> JSONResponse:
    """The one place an error becomes a status: a query, cursor or parameter to fix, or a
    query an engine refused as it is (poison), is a 400; what the request names and the
    mailbox lacks is a 404; the core's transient family (an engine down, or one that refused
    the sidecar's credentials) is a 503 naming the engine where the door it passed knew it."""
    if isinstance(exc, QueryError):
        return _answer(400, BadRequest(detail=exc.message, position=exc.position))
    if isinstance(exc, PoisonError):  # the whole query (no one place in it) is too costly
        return _answer(400, BadRequest(detail=str(exc), position=0))
    if isinstance(exc, CursorError):
        return _answer(400, BadRequest(detail=str(exc)))
    if isinstance(exc, RequestValidationError):
        errors = [ParamError(loc=e.get("loc", ()), msg=e.get("msg", "")) for e in exc.errors()]
        return _answer(400, BadRequest(detail="invalid parameters", errors=errors))
    if isinstance(exc, NotFound):
        return _answer(404, Problem(detail=str(exc)))
    assert isinstance(exc, TransientError), exc  # CORE_ERRORS: nothing else is registered
    component = _component(exc)
    refused = next((e for e in (exc, exc.__cause__) if isinstance(e, ConfigurationError)), None)
    if refused is not None:  # the caller may only retry; the operator must fix it
        log.error("%s refused the sidecar: %s", component, refused.reason)
    else:
        log.warning("unavailable on %s: %s", _route(request) or "<unmatched>", exc)
    return _answer(503, Problem(detail=f"{component} is unavailable"), {"Retry-After": "5"})


def _component(exc: TransientError) -> str:
    """The engine a failure names (set by the door it passed, or by the adapter), else that
    of the failure it came from; "a backend" where none is known."""
    for cause in (exc, exc.__cause__):
        component = getattr(cause, "component", None)
        if isinstance(component, str) and component:
            return component
    return "a backend"


def _answer(status: int, body: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error answer whose body is its documented model (fields that do not apply left
    out, as in every answer)."""
    return JSONResponse(body.model_dump(exclude_unset=True), status_code=status, headers=headers)


MAX_LOGGED_PATH = 200  # characters of an unmatched path the access log keeps
REQUEST_ID = "X-Request-ID"
AMZN_TRACE_ID = "X-Amzn-Trace-Id"  # the ALB's: Root=1-67891233-abcdef012345678912345678;...
_REQUEST_ID_SHAPE = re.compile(r"^[A-Za-z0-9._:=+/@-]{1,128}$")
_ALB_ROOT = re.compile(r"(?:^|;)\s*Root=([A-Za-z0-9-]{1,64})")
MAX_LOGGED_PARAM = 32  # characters of a query parameter's value it keeps


def bounded(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, non-printable ones (control characters, lone
    surrogates, bidi overrides) escaped, with how much was cut: a 30,000-character path or
    mode value is a short log line, and no client can write terminal escapes into the log."""
    kept = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text[:limit])
    cut = len(text) - limit
    return f"{kept}...(+{cut} chars)" if cut > 0 else kept


def _route(request: Request) -> str | None:
    """The matched route's template (``/v1/mailboxes/{mailbox_id}/search``), else None."""
    path = getattr(request.scope.get("route"), "path", None)
    return path if isinstance(path, str) else None


def request_id(request: Request) -> str:
    """The id that ties this request's log lines to the caller's and the balancer's: the
    client's ``X-Request-ID`` when it is a plain token of at most 128 characters, else the
    ALB's trace root (``X-Amzn-Trace-Id: Root=1-...``), else a fresh one. Anything else a
    client sends is not echoed or logged (no log injection, no unbounded field)."""
    given = request.headers.get(REQUEST_ID, "").strip()
    if _REQUEST_ID_SHAPE.match(given):
        return given
    root = _ALB_ROOT.search(request.headers.get(AMZN_TRACE_ID, ""))
    return root.group(1) if root else uuid.uuid4().hex


async def _access_log(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """Every line logged while the request is served carries its ``request_id``
    (:func:`request_id`), and the answer names it in ``X-Request-ID``."""
    rid = request_id(request)
    with logs.context(request_id=rid):
        response = await _served(request, call_next)
    response.headers[REQUEST_ID] = rid
    return response


async def _served(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """One line and one latency sample per request — route template, status, latency, result
    count, never the token — 500s included: an error no handler answered is turned into the
    500 here, inside the log, instead of in Starlette's outermost error middleware (which no
    middleware sees). Every answer is ``Cache-Control: no-store`` (mail must not be cached).
    What a client chose is bounded: a matched route logs its template (no mailbox id), an
    unmatched one ``<unmatched>`` plus its path cut and escaped, ``mode`` is cut likewise."""
    started = time.perf_counter()
    try:
        response = await call_next(request)
    except Exception:
        log.exception(
            "unhandled error on %s", _route(request) or bounded(request.url.path, MAX_LOGGED_PATH)
        )
        response = JSONResponse({"detail": "internal error"}, status_code=500)
    response.headers["Cache-Control"] = "no-store"
    elapsed = time.perf_counter() - started
    matched = _route(request)
    mode = request.query_params.get("mode")
    API_LATENCY.labels(
        matched or "<unmatched>",  # raw paths would be unbounded label values
        mode if mode in MODES else "",
        str(response.status_code),
    ).observe(elapsed)
    fields = {
        "method": bounded(request.method, MAX_LOGGED_PARAM),
        "route": matched or "<unmatched>",
        "status": response.status_code,
        "latency_ms": round(elapsed * 1000, 1),
        "results": getattr(request.state, "results", None),
        "mode": None if mode is None else bounded(mode, MAX_LOGGED_PARAM),
    }
    if matched is None:
        fields["path"] = bounded(request.url.path, MAX_LOGGED_PATH)
    log.info("request", extra=fields)
    return response
