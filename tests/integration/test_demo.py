"""The README's first command, as a new user types it: ``make demo`` loads the sample mailbox,
indexes it through real workers on the embedded Edge store, queries both engines, then serves
the API with its example calls and waits for Ctrl-C.

The user's own variables give it a fresh table, index, store and API port (the defaults may
hold an earlier demo's data on a developer's machine); nothing is prepared behind its back.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from indexer.settings import Settings, to_env
from tests.support.api_fixtures import free_port
from tests.support.waiting import wait_for, wait_http_ok

pytestmark = [pytest.mark.stack, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
SERVING = "Search console:"  # printed last, once the API serves (soft-wrapped: one line)


def _read(proc: subprocess.Popen[str], lines: list[str], serving: threading.Event) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if SERVING in line:
            serving.set()


def test_make_demo_indexes_the_sample_and_serves_the_api(
    settings: Settings, tmp_path: Path
) -> None:
    own = settings.model_copy(update={"api_port": free_port()})
    names = ("TABLE", "STATE_TABLE", "OPENSEARCH_INDEX", "QDRANT_COLLECTION", "QDRANT_PATH",
             "QUEUE_PREFIX", "API_PORT")
    env = {**os.environ, **{k: v for k, v in to_env(own).items()
                            if k.removeprefix("SIDECAR_") in names}}
    proc = subprocess.Popen(["make", "demo"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    lines: list[str] = []
    serving = threading.Event()
    reader = threading.Thread(target=_read, args=(proc, lines, serving), daemon=True)
    reader.start()
    try:
        assert serving.wait(600), "".join(lines[-60:])
        console = f"127.0.0.1:{own.api_port}/console?mailbox=demo%40example.com"
        wait_for(lambda: console in "".join(lines), timeout=30,
                 message=lambda: "no console link: " + "".join(lines[-20:]))
        wait_http_ok(f"http://127.0.0.1:{own.api_port}/healthz", timeout=30, proc=proc,
                     what="make demo's API")
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        reader.join(10)
    out = "".join(lines)
    ingest = re.search(r"ingest: read=(\d+) applied=(\d+) dead_lettered=(\d+)", out)
    assert ingest and int(ingest[2]) > 0 and ingest[3] == "0", out[-3000:]
    assert re.search(r"full-text 'release checklist': [1-9]\d* hit", out), out[-3000:]
    assert "nearest neighbours of" in out and "no vectors indexed" not in out
    # the example curl calls, each with its real hits (score, subject, sender)
    calls = out.split("$ curl")[1:]
    assert len(calls) >= 5, out[-3000:]
    assert all(re.search(r"^\s+\d\.\d{3}\s+\S", call, re.M) for call in calls[:4]), out[-3000:]
    assert console in out
