"""Celery's output as the sidecar's JSON lines (:mod:`indexer.logs`): a worker's from its
first line, the task's ``task_id``/``task_name`` on the lines about a task and on every line
logged while one runs (what Celery's ``TaskFormatter`` added, which our formatter replaces),
and what Celery writes straight to the stream from its signal handlers."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from indexer import logs


def celery_json_logs() -> None:
    """Make Celery workers log JSON lines too: reformat the handlers Celery installs, at the
    operator's level when one is set (``sidecar worker`` passes Celery its own ``-l``).

    Connected when the tasks module is imported, which a worker does before it sets up logging
    and before any model is loaded.
    """
    from celery.signals import after_setup_logger, after_setup_task_logger

    logs.quiet_libraries()
    logs.add_fields_source(_celery_task_fields)

    def reformat(logger: logging.Logger | None = None, **_: Any) -> None:
        for handler in logger.handlers if logger is not None else ():
            handler.setFormatter(logs.JsonFormatter())
            if not any(isinstance(f, _TaskLineFields) for f in handler.filters):
                handler.addFilter(_TaskLineFields())
        level = logs.chosen_level()
        if logger is not None and level is not None:
            logger.setLevel(level)

    after_setup_logger.connect(reformat, weak=False)
    after_setup_task_logger.connect(reformat, weak=False)


def celery_worker_logs(level: int = logging.WARNING) -> None:
    """A Celery worker process's own output as JSON lines, from its first line: called when
    the app module is imported by ``celery worker``, before Celery checks its privileges
    (whose ``SecurityWarning`` as root was plain text) and sets up logging (it then keeps our
    handler on the root logger, :func:`celery_json_logs` adds the task fields). What Celery
    writes straight to the stream from its signal handlers ("worker: Warm shutdown") becomes a
    JSON line too."""
    logs.configure_unless_configured(level)
    celery_json_logs()
    for handler in logging.getLogger().handlers:
        handler.addFilter(_TaskLineFields())
    celery_says_json()


def celery_says_json() -> None:
    """What Celery's worker writes straight to the stream from its signal handlers ("worker:
    Warm shutdown"), as a JSON line: ``celery.apps.worker.safe_say`` replaced. Still one
    ``os.write`` and no lock (it runs in signal handlers); an error writing it is ignored, as
    Celery does."""
    import celery.apps.worker

    def say(msg: str, f: Any = sys.__stderr__) -> None:
        line = json.dumps({"time": logs.timestamp(time.time()), "level": "info",
                           "logger": "celery.apps.worker", "message": str(msg).strip()})
        with suppress(OSError, AttributeError, ValueError):
            os.write(f.fileno(), f"{line}\n".encode())

    celery.apps.worker.safe_say = say


def _celery_task_fields() -> dict[str, Any]:
    """``task_id``/``task_name`` of the task this worker process runs now, if any (what
    Celery's ``TaskFormatter`` added, which our formatter replaces)."""
    from celery._state import get_current_task

    task = get_current_task()  # None outside a task
    request = getattr(task, "request", None) if task is not None else None
    task_id = getattr(request, "id", None)
    return {"task_id": task_id, "task_name": task.name} if task_id and task else {}


class _TaskLineFields(logging.Filter):
    """Celery's worker lines about a task ("Task x[id] received", "... succeeded in 0.1s")
    carry it in their arguments, logged outside the task's run: the same two fields."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping) and "id" in args and "name" in args:
            record.__dict__.setdefault("task_id", str(args["id"]))
            record.__dict__.setdefault("task_name", str(args["name"]))
        return True
