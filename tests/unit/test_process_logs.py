"""Issue 40 part 4, the processes without a service behind them: the Lambda handler under the
runtime's own logging set-up emits its info summary as a JSON line; a ``SIDECAR_*`` value the
settings refuse is one JSON line naming the variable and exit status 2; fields bound with
``logs.context`` reach every line."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from indexer import logs
from indexer.sources import lambda_handler

RUNTIME_FORMAT = "[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t%(aws_request_id)s\t%(message)s\n"


class _RequestId(logging.Filter):
    """What the Python runtime's filter does: the invocation's request id on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.aws_request_id = "8f5c-request"
        return True


@pytest.fixture
def runtime_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The root logger as the Lambda Python runtime leaves it before the handler runs: one
    text handler (its format, its request-id filter), level WARNING; the test runner's own
    handlers set aside meanwhile."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(RUNTIME_FORMAT, "%Y-%m-%dT%H:%M:%S"))
    handler.addFilter(_RequestId())
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "sidecar-indexer")
    monkeypatch.delenv(logs.LEVEL_ENV, raising=False)
    monkeypatch.delenv("AWS_LAMBDA_LOG_LEVEL", raising=False)
    monkeypatch.setattr(lambda_handler, "_logging_ready", False)
    try:
        yield stream
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


def test_the_lambda_handler_logs_its_summary_as_json(runtime_logging: io.StringIO) -> None:
    assert lambda_handler.handler({"Records": []}, None) == {"batchItemFailures": []}
    lines = runtime_logging.getvalue().splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]  # text would fail here
    summary = [e for e in entries if str(e["message"]).startswith("lambda batch:")]
    assert len(summary) == 1, lines
    assert summary[0]["level"] == "info"
    assert summary[0]["aws_request_id"] == "8f5c-request"  # the runtime's filter still applies


def test_the_functions_log_level_is_honoured(
    runtime_logging: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_LOG_LEVEL", "WARN")
    lambda_handler.handler({"Records": []}, None)
    assert runtime_logging.getvalue() == ""  # the info summary is below the function's level


def _sidecar(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")}
    return subprocess.run([sys.executable, "-m", "indexer.cli.main", *argv],
                          env={**clean, **env}, capture_output=True, text=True, timeout=120)


def test_a_bad_setting_is_one_line_naming_the_variable_and_exit_2() -> None:
    done = _sidecar({"SIDECAR_BATCH_MESSAGES": "abc"}, "init")
    assert done.returncode == 2, done.stderr
    output = (done.stdout + done.stderr).splitlines()
    assert len(output) <= 2, output
    entry = json.loads(output[-1])
    assert entry["level"] == "error"
    assert "SIDECAR_BATCH_MESSAGES" in entry["message"] and "abc" not in entry["message"]
    assert "Traceback" not in done.stderr


def test_a_refused_secret_is_named_but_not_shown() -> None:
    done = _sidecar({"SIDECAR_AWS_ROLE_ARN": "not-an-arn-s3cr3t"}, "init")
    assert done.returncode == 2, done.stderr
    assert "SIDECAR_AWS_ROLE_ARN" in done.stderr and "s3cr3t" not in done.stderr


def test_bound_fields_reach_every_line() -> None:
    record = logging.makeLogRecord({"name": "x", "levelno": logging.INFO, "levelname": "INFO",
                                    "msg": "hello"})
    formatter = logs.JsonFormatter()
    with logs.context(request_id="r-1"):
        with logs.context(mailbox_hash="m"):
            inner = json.loads(formatter.format(record))
        outer = json.loads(formatter.format(record))
    after = json.loads(formatter.format(record))
    assert (inner["request_id"], inner["mailbox_hash"]) == ("r-1", "m")
    assert outer["request_id"] == "r-1" and "mailbox_hash" not in outer
    assert "request_id" not in after
