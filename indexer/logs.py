"""Structured JSON logs: one object per line, with the record's ``extra`` fields."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: int = logging.INFO, *names: str) -> None:
    """JSON lines on stderr for the named loggers (all when none are named)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    for name in names or ("",):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False


def configure_unless_configured(level: int = logging.INFO) -> None:
    """JSON lines on stderr for a command's process, unless logging is already set up (a test
    runner's capture, an embedding application): then theirs is left alone."""
    if not logging.getLogger().handlers:
        configure(level)


def celery_json_logs() -> None:
    """Make Celery workers log JSON lines too: reformat the handlers Celery installs.

    Connected when the tasks module is imported, which a worker does before it sets up logging.
    """
    from celery.signals import after_setup_logger, after_setup_task_logger

    def reformat(logger: logging.Logger | None = None, **_: Any) -> None:
        for handler in logger.handlers if logger is not None else ():
            handler.setFormatter(JsonFormatter())

    after_setup_logger.connect(reformat, weak=False)
    after_setup_task_logger.connect(reformat, weak=False)
