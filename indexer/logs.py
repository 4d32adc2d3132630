"""Structured JSON logs: one object per line on stderr, with the record's ``extra`` fields.

Why it is shaped this way:
- ``time`` is ISO-8601 in UTC with milliseconds and the zone (``2026-12-01T09:30:00.123+00:00``):
  log stores and people comparing two hosts' lines need both.
- Every library's output goes through the same formatter, or a line-oriented collector sees
  plain text between the JSON: uvicorn's default logging configuration and Celery's handlers
  (:mod:`indexer.pipeline.celery_logs`) are given this formatter; transformers' and
  huggingface_hub's loggers keep no handler of their own (they propagate to ours); tqdm's
  progress bars (the model's "Loading weights" bar) are switched off, since a bar is not a log
  line.
- The level is the operator's choice for every command: ``SIDECAR_LOG_LEVEL`` (or
  ``sidecar --log-level``, which sets it for the process and its children) wins over a
  command's own default.
- Extra fields whose name says secret (token, password, authorization, ...) are masked, so a
  careless ``extra=`` never writes a credential.
- Lines say what they belong to without every call passing it: :func:`context` binds fields
  (the API's ``request_id``) to the current thread or task; a Celery task's lines carry
  ``task_id``/``task_name`` (:mod:`indexer.pipeline.celery_logs`); with
  OpenTelemetry on, ``trace_id``/``span_id`` of the current span (:func:`add_fields_source`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

LEVEL_ENV = "SIDECAR_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error", "critical")
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_SECRET = re.compile(r"token|passw|secret|authori[sz]ation|api_?key|credential|cookie", re.I)
# Read by huggingface_hub / transformers / tqdm when they are imported: set before that.
_NO_PROGRESS_BARS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}
# Libraries that install a handler (with their own text format) on their root logger.
_ADOPTED = ("transformers", "huggingface_hub")
# Fields bound to the current thread or asyncio task (:func:`context`).
_BOUND: ContextVar[Mapping[str, Any] | None] = ContextVar("sidecar_log_fields", default=None)
# Callables adding fields from elsewhere (the current Celery task, the current span).
_SOURCES: list[Callable[[], Mapping[str, Any]]] = []


@contextmanager
def context(**fields: Any) -> Iterator[None]:
    """Every line logged inside carries ``fields`` (nested contexts add to the outer one)."""
    token = _BOUND.set({**(_BOUND.get() or {}), **fields})
    try:
        yield
    finally:
        _BOUND.reset(token)


def add_fields_source(source: Callable[[], Mapping[str, Any]]) -> None:
    """Have every line carry what ``source()`` returns when it is written (once per source)."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def _context_fields() -> dict[str, Any]:
    fields: dict[str, Any] = dict(_BOUND.get() or {})
    for source in _SOURCES:
        try:
            fields.update(source())
        except Exception:  # noqa: S112 - a broken source must never cost the log line
            continue
    return fields


def timestamp(created: float) -> str:
    """ISO-8601, UTC, milliseconds, with the zone."""
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_context_fields())
        entry.update({k: "[redacted]" if _SECRET.search(k) else v
                      for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def uvicorn_formatter(**_: Any) -> JsonFormatter:
    """A ``logging.config`` factory: uvicorn passes its text format options, which JSON has
    no use for."""
    return JsonFormatter()


class _JsonHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Ours: told apart from a test runner's or an embedding application's handlers."""


def chosen_level() -> int | None:
    """The operator's level (``SIDECAR_LOG_LEVEL``), or None when unset."""
    raw = os.environ.get(LEVEL_ENV, "").strip().lower()
    return logging.getLevelNamesMapping()[raw.upper()] if raw in LEVELS else None


def choose_level(name: str) -> None:
    """``sidecar --log-level``: the level of this process and of the ones it starts."""
    if name.lower() not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}")
    os.environ[LEVEL_ENV] = name.lower()


def quiet_libraries() -> None:
    """No progress bars, and transformers' / huggingface_hub's records through our handler.

    Both libraries add a text handler to their root logger and stop propagation when first
    imported; a logger of :class:`_Propagating` created before that refuses both.
    """
    for key, value in _NO_PROGRESS_BARS.items():
        os.environ.setdefault(key, value)
    for name in _ADOPTED:
        existing = logging.Logger.manager.loggerDict.get(name)
        if isinstance(existing, logging.Logger):  # imported already: undo what it set up
            existing.handlers.clear()
            existing.propagate = True
            continue
        previous = logging.getLoggerClass()
        logging.setLoggerClass(_Propagating)
        try:
            logging.getLogger(name)
        finally:
            logging.setLoggerClass(previous)


class _Propagating(logging.Logger):
    """A library's root logger that keeps no handler of its own and always propagates."""

    def addHandler(self, hdlr: logging.Handler) -> None:
        return None

    @property
    def propagate(self) -> bool:
        return True

    @propagate.setter
    def propagate(self, _value: bool) -> None:
        return None


def _route_uvicorn() -> None:
    """``uvicorn.Config`` applies its default ``log_config`` (this very dict) with
    ``dictConfig`` when the server is built, after our set-up: give it our formatter."""
    try:
        from uvicorn.config import LOGGING_CONFIG
    except ImportError:  # pragma: no cover - uvicorn is a dependency of the runtime
        return
    for name in ("default", "access"):
        LOGGING_CONFIG["formatters"][name] = {"()": "indexer.logs.uvicorn_formatter"}


def configure(level: int = logging.INFO, *names: str) -> None:
    """JSON lines on stderr for the named loggers (all when none are named), at the operator's
    level if one is set, else at ``level``."""
    handler = _JsonHandler()
    handler.setFormatter(JsonFormatter())
    quiet_libraries()
    _route_uvicorn()
    logging.captureWarnings(True)  # warnings.warn(...) of any library: a JSON line too
    for name in names or ("",):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(chosen_level() or level)
        logger.propagate = not name  # a named logger writes its own lines, once
    if names and not logging.getLogger().handlers:
        configure_unless_configured(logging.WARNING)  # what other loggers say: JSON too


def configure_unless_configured(level: int = logging.INFO) -> None:
    """JSON lines on stderr for a command's process, unless logging is already set up by
    someone else (a test runner's capture, an embedding application): theirs is left alone."""
    handlers = logging.getLogger().handlers
    if all(isinstance(h, _JsonHandler) for h in handlers):
        configure(level)


def refuse(problem: str) -> None:
    """A command refusing to start (a table missing, a setting wrong): ``error: <problem>`` on
    stderr for a person at a terminal; anywhere else (a container's log, a pipe) one JSON line
    at error, as every other line there. Written to the ``sys.stderr`` of the moment (not
    through a handler bound to the stderr of when logging was set up), so a caller that
    captures stderr — a test runner, an embedding process — gets the line."""
    if sys.stderr.isatty():
        print(f"error: {problem}", file=sys.stderr)
        return
    record = logging.LogRecord("sidecar", logging.ERROR, __file__, 0, "error: %s", (problem,),
                               None)
    print(JsonFormatter().format(record), file=sys.stderr, flush=True)


def configure_lambda(level: int = logging.INFO) -> None:
    """Logging of the Lambda handler, whichever runtime set it up, at the operator's level —
    ``SIDECAR_LOG_LEVEL``, else the function's ``AWS_LAMBDA_LOG_LEVEL``, else ``level`` (the
    runtime leaves the root logger at WARNING, which dropped the handler's info summary).

    The runtime's handlers on the root logger frame each record for CloudWatch and tag it with
    the request id. In Lambda's JSON log format (``AWS_LAMBDA_LOG_FORMAT=JSON``, what the CDK
    function sets) their formatter already writes a JSON object and marks the frame with the
    record's level, by which Lambda filters and indexes the line: it stays, and
    :class:`_LambdaFields` gives its lines the sidecar's bound fields and masking. In the text
    format they get our JSON formatter. With no handler at all (a local call): ours, on
    stderr."""
    quiet_libraries()
    root = logging.getLogger()
    runtime = [h for h in root.handlers if not isinstance(h, _JsonHandler)]
    if not runtime:
        configure(level)
        return
    lambda_json = os.environ.get("AWS_LAMBDA_LOG_FORMAT", "").strip().upper() == "JSON"
    for handler in runtime:
        if not lambda_json:
            handler.setFormatter(JsonFormatter())
        elif not any(isinstance(f, _LambdaFields) for f in handler.filters):
            handler.addFilter(_LambdaFields())
    lambda_level = os.environ.get("AWS_LAMBDA_LOG_LEVEL", "").strip().upper()
    chosen = chosen_level() or logging.getLevelNamesMapping().get(lambda_level)
    root.setLevel(chosen or level)


class _LambdaFields(logging.Filter):
    """For the Lambda runtime's JSON formatter, which writes every attribute a record carries
    beyond the standard ones: the fields :class:`JsonFormatter` would add (bound with
    :func:`context`, the current span's), and secret-named ``extra`` values masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context_fields().items():
            record.__dict__.setdefault(key, value)
        for key in [k for k in vars(record) if k not in _STANDARD and _SECRET.search(k)]:
            record.__dict__[key] = "[redacted]"
        return True
