"""Issue 23 part 8: real commands log only JSON lines on stderr, at the level asked for (and
write nothing else on stdout: issue 40).

`sidecar --log-level debug tail` (boto3/botocore debug output included) and `SIDECAR_LOG_LEVEL
=debug sidecar serve` (uvicorn, the model loading with its tqdm bar, the API's own lines, and
the vectors consumer it runs beside the embedded store: a Celery worker, whose banner went to
stdout) run against the stack briefly; every stdout and stderr line must be a JSON object whose `time` is ISO-8601 UTC
with milliseconds and the zone, and debug lines must be there (the level took effect).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from indexer.settings import Settings, to_env
from tests.support.api_fixtures import free_port
from tests.support.pipeline_helpers import prepare_tables
from tests.support.waiting import wait_for, wait_http_ok
from tests.unit.test_logs import STAMP

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def _logged(log: Path) -> list[dict[str, object]]:
    """The JSON entries written so far (a line being written, or not JSON, is skipped here:
    ``_assert_json_lines`` judges the whole log at the end)."""
    entries = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _from(log: Path, prefix: str) -> bool:
    """Some entry of the log comes from a logger whose name starts with ``prefix``."""
    return any(str(e.get("logger")).startswith(prefix) for e in _logged(log))


def _leading(log: Path) -> bool:
    """The tailer has logged (info) that it holds its lease: it runs, its SIGTERM handler is
    in place."""
    return any(e.get("level") == "info" and "acquired" in str(e.get("message"))
               for e in _logged(log))


def _run_until(argv: list[str], env: dict[str, str], log: Path,
               ready: Callable[[], bool], timeout: float, url: str | None = None) -> None:
    """Run the command until ``ready()``, then stop it with SIGTERM. With ``url``: once it
    answers, a malformed request is sent, and ``ready()`` is waited for after that."""
    with log.open("wb") as err, log.with_suffix(".out").open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "indexer.cli.main", *argv], env=env,
                                stdout=out, stderr=err, start_new_session=True)

    def running() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        return True

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:]

    try:
        if url is not None:  # uvicorn warns of a malformed request: its line, through ours
            wait_http_ok(url, timeout=timeout, proc=proc, log=log, what=argv[0])
            host, port = url.split("/")[2].split(":")
            with socket.create_connection((host, int(port)), timeout=5) as conn:
                conn.sendall(b"NOT HTTP\r\n\r\n")
                conn.recv(1024)
        wait_for(lambda: running() and ready(), timeout=timeout, interval=0.5,
                 message=lambda: f"`{' '.join(argv)}` did not log what was expected\n" + tail())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _assert_json_lines(log: Path) -> list[dict[str, object]]:
    """Every line of stderr (``log``) and of stdout (beside it, ``.out``) a JSON object."""
    text = log.read_text(errors="replace") + log.with_suffix(".out").read_text(errors="replace")
    assert "\r" not in text, "a progress bar reached stderr"
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line[:300]!r}")
        assert isinstance(entry, dict) and STAMP.match(str(entry.get("time"))), line[:300]
        entries.append(entry)
    assert entries
    return entries


def test_tail_at_debug_logs_only_json(settings: Settings, tmp_path: Path) -> None:
    prepare_tables(settings)
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
    env.pop("SIDECAR_LOG_LEVEL", None)
    log = tmp_path / "tail.err"
    _run_until(["--log-level", "debug", "tail", "--lease-s", "4", "--renew-s", "1"], env, log,
               ready=lambda: _from(log, "botocore") and _leading(log), timeout=60)
    entries = _assert_json_lines(log)
    assert {"debug", "info"} <= {e["level"] for e in entries}
    assert any(str(e["logger"]).startswith("botocore") for e in entries)  # a library's lines
    assert any(e["message"] == "tail stopped" for e in entries)


def test_serve_logs_only_json_at_the_level_set(settings: Settings, tmp_path: Path) -> None:
    prepare_tables(settings)
    port = free_port()
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1", "SIDECAR_LOG_LEVEL": "debug",
           "SIDECAR_API_PORT": str(port), "SIDECAR_API_TOKENS": "{}"}
    log = tmp_path / "serve.err"
    # Ready once uvicorn logged and the vectors consumer's worker is starting its parts (its
    # banner, without -q, came before that).
    def ready() -> bool:
        return _from(log, "uvicorn") and any(
            e["logger"] == "celery.bootsteps" and "Starting" in str(e["message"])
            for e in _logged(log))

    _run_until(["serve"], env, log, ready, timeout=90, url=f"http://127.0.0.1:{port}/healthz")
    entries = _assert_json_lines(log)
    assert "debug" in {e["level"] for e in entries}
    assert any(str(e["logger"]).startswith("uvicorn") for e in entries)  # uvicorn through ours
