"""Issue 40 part 4: the Lambda handler under the real Python runtime (``awslambdaric``, the
version the Lambda image installs) writes its lines as JSON, in both of Lambda's log formats.

The runtime is started as the image starts it (``python -m awslambdaric <handler>``) against a
stand-in for Lambda's Runtime API on a loopback port: one invocation, then the runtime waits
for the next until it is stopped. Its log lines are read from the telemetry file descriptor
Lambda gives it (``_LAMBDA_TELEMETRY_LOG_FD``), frame by frame, as the platform reads them.

- JSON format (``AWS_LAMBDA_LOG_FORMAT=JSON``, the CDK function's ``LoggingConfig``): the
  summary is a JSON frame at INFO — the frame type is what Lambda's level filter reads — with
  the invocation's ``requestId`` and the sidecar's bound fields.
- Text format (a function deployed without it): the runtime's text formatter is replaced, so
  the line is the sidecar's JSON anyway.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REQUEST_ID = "5e1f3b7a-0d4c-4a61-9d0e-2c6f7a1b8e90"
FUNCTION = "sidecar-indexer"
HANDLER = "indexer.sources.lambda_handler.handler"
ROOT = Path(__file__).resolve().parents[2]
# The runtime's frame types (awslambdaric.lambda_runtime_log_utils): JSON and text, at INFO.
JSON_INFO, TEXT_INFO = 0xA55A000E, 0xA55A000F


class RuntimeApi(ThreadingHTTPServer):
    """Lambda's Runtime API as the runtime client uses it: one event to hand out, the answer
    kept; later ``next`` calls wait until the server closes."""

    def __init__(self, event: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Routes)
        self.event = event
        self.handed = False
        self.answers: list[tuple[str, bytes]] = []
        self.answered = threading.Event()
        self.closing = threading.Event()


class _Routes(BaseHTTPRequestHandler):
    server: RuntimeApi

    def log_message(self, format: str, *args: Any) -> None:  # the base class names it so
        return None

    def do_GET(self) -> None:
        if self.path != "/2018-06-01/runtime/invocation/next" or self.server.handed:
            self.server.closing.wait(60)  # the runtime's next long poll: never answered
            return
        self.server.handed = True
        body = json.dumps(self.server.event).encode()
        self.send_response(200)
        for name, value in {
            "Lambda-Runtime-Aws-Request-Id": REQUEST_ID,
            "Lambda-Runtime-Deadline-Ms": str(int(time.time() * 1000) + 60_000),
            "Lambda-Runtime-Invoked-Function-Arn":
                f"arn:aws:lambda:us-east-1:123456789012:function:{FUNCTION}",
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.answers.append((self.path, self.rfile.read(length)))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.server.answered.set()


@pytest.fixture
def runtime_api() -> Iterator[RuntimeApi]:
    api = RuntimeApi({"Records": []})
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        api.closing.set()
        api.shutdown()
        api.server_close()


def frames(data: bytes) -> list[tuple[int, str]]:
    """(frame type, message) of each frame: type 4 bytes, length 4, timestamp 8, message."""
    out, at = [], 0
    while at < len(data):
        kind = int.from_bytes(data[at:at + 4], "big")
        length = int.from_bytes(data[at + 4:at + 8], "big")
        out.append((kind, data[at + 16:at + 16 + length].decode()))
        at += 16 + length
    return out


def invoke_once(api: RuntimeApi, tmp_path: Path, log_format: str | None
                ) -> tuple[list[tuple[int, str]], str]:
    """Start the runtime, wait for its answer to the one invocation, stop it; its frames and
    what it wrote on stdout and stderr."""
    telemetry = tmp_path / "telemetry.bin"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AWS_LAMBDA_", "SIDECAR_LOG"))}
    env |= {"AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{api.server_address[1]}",
            "AWS_LAMBDA_FUNCTION_NAME": FUNCTION, "AWS_LAMBDA_LOG_LEVEL": "INFO"}
    if log_format:
        env["AWS_LAMBDA_LOG_FORMAT"] = log_format
    with telemetry.open("wb") as sink:
        env["_LAMBDA_TELEMETRY_LOG_FD"] = str(sink.fileno())
        runtime = subprocess.Popen(
            [sys.executable, "-m", "awslambdaric", HANDLER], cwd=ROOT, env=env,
            pass_fds=(sink.fileno(),), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        try:
            assert api.answered.wait(120), "the runtime never answered the invocation"
        finally:
            runtime.terminate()
            output, _ = runtime.communicate(timeout=30)
    return frames(telemetry.read_bytes()), output


def test_json_log_format_frames_the_summary_as_json_at_info(
        runtime_api: RuntimeApi, tmp_path: Path) -> None:
    logged, output = invoke_once(runtime_api, tmp_path, "JSON")
    ((path, answer),) = runtime_api.answers
    assert path == f"/2018-06-01/runtime/invocation/{REQUEST_ID}/response"
    assert json.loads(answer) == {"batchItemFailures": []}
    entries = [(kind, json.loads(message)) for kind, message in logged]  # text fails here
    summary = [(kind, e) for kind, e in entries if e["message"].startswith("lambda batch:")]
    assert len(summary) == 1, entries
    kind, entry = summary[0]
    assert kind == JSON_INFO  # what Lambda's application log-level filter reads
    assert entry["level"] == "INFO" and entry["requestId"] == REQUEST_ID
    assert entry["logger"] == "indexer.sources.lambda_handler"
    # Nothing went around the runtime's logging (a print, a library's own handler).
    assert [line for line in output.splitlines() if line.strip()] == []


def test_text_log_format_still_writes_the_sidecars_json(
        runtime_api: RuntimeApi, tmp_path: Path) -> None:
    logged, output = invoke_once(runtime_api, tmp_path, None)
    assert json.loads(runtime_api.answers[0][1]) == {"batchItemFailures": []}
    entries = [(kind, json.loads(message)) for kind, message in logged]
    summary = [(kind, e) for kind, e in entries if e["message"].startswith("lambda batch:")]
    assert len(summary) == 1, entries
    kind, entry = summary[0]
    assert kind == TEXT_INFO
    assert entry["level"] == "info" and entry["aws_request_id"] == REQUEST_ID
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["time"])
    assert [line for line in output.splitlines() if line.strip()] == []


def test_the_runtime_tested_is_the_one_the_lambda_image_installs() -> None:
    """The dev group's awslambdaric (what the tests above start) is the Lambda image's pin."""
    from importlib.metadata import version

    dockerfile = (ROOT / "deploy" / "cdk" / "lambda" / "Dockerfile").read_text()
    pinned = re.search(r"awslambdaric==([0-9][0-9.]*)", dockerfile)
    assert pinned is not None, "deploy/cdk/lambda/Dockerfile pins no awslambdaric"
    assert version("awslambdaric") == pinned.group(1)
