"""The JSON formatter (issue 23 part 8): ISO-8601 UTC timestamps with milliseconds and the zone,
extra fields kept, secret-named fields masked, and the operator's level winning."""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime

import pytest

from indexer import logs

STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}\+00:00$")


def _line(**extra: object) -> dict[str, object]:
    record = logging.makeLogRecord({"name": "x", "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": "hello %s", "args": ("you",), **extra})
    record.created = 1_764_582_600.1234  # 2025-12-01T09:50:00.123Z
    parsed: dict[str, object] = json.loads(logs.JsonFormatter().format(record))
    return parsed


def test_time_has_milliseconds_and_the_zone() -> None:
    entry = _line()
    assert entry["time"] == "2025-12-01T09:50:00.123+00:00"
    assert STAMP.match(str(entry["time"]))
    assert datetime.fromisoformat(str(entry["time"])).utcoffset() is not None
    assert (entry["level"], entry["logger"], entry["message"]) == ("info", "x", "hello you")


def test_extra_fields_are_kept_and_secret_ones_masked() -> None:
    entry = _line(route="/search", status=200, api_token="t0k3n", opensearch_password="pw",
                  Authorization="Bearer x")
    assert (entry["route"], entry["status"]) == ("/search", 200)
    assert entry["api_token"] == entry["opensearch_password"] == "[redacted]"
    assert entry["Authorization"] == "[redacted]"
    assert "t0k3n" not in json.dumps(entry)


def test_the_operators_level_wins_over_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set, then removed, through monkeypatch: what choose_level writes is undone with it (a
    # bare delenv of an unset variable records nothing, and "debug" outlived the test: the
    # workers later tests spawn logged at debug).
    monkeypatch.setenv(logs.LEVEL_ENV, "info")
    monkeypatch.delenv(logs.LEVEL_ENV)
    assert logs.chosen_level() is None
    logs.choose_level("DEBUG")
    assert logs.chosen_level() == logging.DEBUG
    monkeypatch.setenv(logs.LEVEL_ENV, "Warning")
    assert logs.chosen_level() == logging.WARNING
    with pytest.raises(ValueError, match="log level"):
        logs.choose_level("loud")


def test_configure_routes_uvicorn_and_silences_progress_bars(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging.config

    from uvicorn.config import LOGGING_CONFIG

    for key in ("HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        monkeypatch.delenv(key, raising=False)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    logs.configure(logging.INFO)
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == os.environ["TQDM_DISABLE"] == "1"
    logging.config.dictConfig(LOGGING_CONFIG)  # what uvicorn.Config does with its default
    (handler,) = logging.getLogger("uvicorn").handlers
    assert isinstance(handler.formatter, logs.JsonFormatter)
    logging.captureWarnings(False)  # leave pytest's own warning capture as it was
