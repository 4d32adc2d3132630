"""Issue 40 part 5: tracing is opt-in. With ``OTEL_EXPORTER_OTLP_ENDPOINT`` unset, the
sidecar's real processes — ``sidecar ingest`` sending tasks, a Celery worker indexing them,
``sidecar serve`` answering a search — import no OpenTelemetry SDK, exporter or
instrumentation module, though the ``[otel]`` extra is installed here; and no module of ours
imports OpenTelemetry at all.

What they still import is the bare API, by two dependencies, each named with its line:
- FastAPI 0.163 (``opentelemetry-api`` is a hard dependency of it), in the API's process:
  ``fastapi/telemetry/_api.py`` lines 9-13 and ``fastapi/telemetry/_asgi.py`` lines 17-22
  (context, logs, metrics, trace, propagate) — not guarded, so it cannot be kept out;
- redis-py 8, in every process that talks to the broker: ``redis/observability/metrics.py``
  line 37, ``from opentelemetry.metrics import Meter`` in a ``try`` (the API's metrics
  module). Its ``redis/observability/providers.py`` line 32 would import the SDK's metrics
  too, ~60 modules: that one the sidecar refuses (:func:`indexer.otel.keep_sdk_out`), and
  redis takes it as "not installed".

Two reports per process: ``PYTHONPROFILEIMPORTTIME=1`` makes Python list every import it
attempts, nested under the module that asked for it, so the importer of each OpenTelemetry
module is read from the process's own report (a refused import is listed too: an attempt by a
module of ours would fail the test as well); and a ``sitecustomize`` on ``PYTHONPATH`` writes
the OpenTelemetry modules in ``sys.modules`` every half second, which says what was actually
loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import httpx
import pytest

from indexer.pipeline.workers import WORKERS, stop_workers, worker_argv
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from tests.support.api_fixtures import free_port, mail, serve_process, store_all
from tests.support.pipeline_helpers import export_stream, opensearch_docs, prepare_tables
from tests.support.waiting import wait_for, wait_http_ok

pytestmark = pytest.mark.stack

BOX, TOKEN = "untraced@example.com", "otel-off-token"
SENDER = ("Ops", "ops@example.org")
MESSAGES = 3
# The modules that may import OpenTelemetry's bare API (see the module's docstring).
THIRD_PARTY_IMPORTERS = {
    "fastapi.telemetry._api", "fastapi.telemetry._asgi",
    "redis.observability.metrics", "redis.observability.providers",
}
NEVER = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation")
# Loaded into every process below (PYTHONPATH): every half second, the OpenTelemetry modules in
# its sys.modules (however it ends: a SIGTERM'd server, a pool child ending without atexit).
SITECUSTOMIZE = """
import json, os, sys, threading, time

def _write():
    names = sorted(m for m, mod in list(sys.modules.items())
                   if mod is not None and m.split(".")[0] == "opentelemetry")
    path = os.path.join(os.environ["OTEL_OFF_REPORTS"], f"{os.getpid()}.json")
    with open(path + ".tmp", "w") as out:
        json.dump({"argv": sys.argv, "modules": names}, out)
    os.replace(path + ".tmp", path)

def _every_half_second():
    while True:
        time.sleep(0.5)
        try:
            _write()
        except Exception:
            pass

def _start():
    threading.Thread(target=_every_half_second, name="otel-off", daemon=True).start()

_start()
os.register_at_fork(after_in_child=_start)  # a Celery pool child reports too
"""


def importers(report: str) -> dict[str, str | None]:
    """Each module in a ``-X importtime`` report, with the module whose import brought it in
    (None: imported at top level or from a function). Python prints a module after the ones
    it imported, one level of indentation deeper, so read backwards a module's importer is
    the latest one seen at the level above."""
    rows = []
    for line in report.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        field = line.split("|", 2)[2]
        name = field.strip()
        rows.append(((len(field) - len(field.lstrip()) - 1) // 2, name))
    found: dict[str, str | None] = {}
    above: dict[int, str] = {}
    for depth, name in reversed(rows):
        found.setdefault(name, above.get(depth - 1) if depth else None)
        above[depth] = name
        for deeper in [d for d in above if d > depth]:
            del above[deeper]
    return found


def otel_importers(report: str) -> dict[str, str | None]:
    """Each OpenTelemetry module imported, with the first module outside OpenTelemetry on its
    chain of importers (who brought OpenTelemetry in)."""
    found = importers(report)
    out: dict[str, str | None] = {}
    for name in found:
        if not _otel(name):
            continue
        importer = found[name]
        while importer is not None and _otel(importer):
            importer = found.get(importer)
        out[name] = importer
    return out


def _otel(name: str) -> bool:
    return name == "opentelemetry" or name.startswith("opentelemetry.")


def check(report: str, what: str) -> dict[str, str | None]:
    """OpenTelemetry asked for only by the two dependencies' known lines, never by a module
    of ours, nor from a function (no importer)."""
    assert "import time:" in report, f"{what}: no import report (PYTHONPROFILEIMPORTTIME)"
    imported = otel_importers(report)
    unexpected = {m: by for m, by in imported.items() if by not in THIRD_PARTY_IMPORTERS}
    assert unexpected == {}, what
    return imported


def loaded(reports: Path) -> dict[str, list[str]]:
    """What each process had loaded of OpenTelemetry last time it wrote, by its command."""
    out = {}
    for path in reports.glob("*.json"):
        entry = json.loads(path.read_text())
        argv = entry["argv"]
        name = "worker" if "worker" in argv else " ".join(argv[1:2]) or argv[0]
        out[f"{name} ({path.stem})"] = entry["modules"]
    return out


def test_processes_without_an_endpoint_import_no_tracing(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:  # the extra is installed: the test means something (not imported: refused here)
        version("opentelemetry-sdk")
    except PackageNotFoundError:
        pytest.skip("the [otel] extra is not installed")
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # every process below reports
    site, reports = tmp_path / "site", tmp_path / "loaded"
    site.mkdir()
    reports.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("OTEL_OFF_REPORTS", str(reports))
    prepare_tables(settings)
    store_all(settings, BOX, [mail(n, f"untraced report {n}", "quarterly numbers",
                                   sender=SENDER, to=["a@example.com"]) for n in range(MESSAGES)])
    records = tmp_path / "records.jsonl"
    export_stream(settings, records)
    env = {**os.environ, **to_env(settings),
           "SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN): [BOX]})}

    # The full-text role's two workers (batches, contact recounts), each with a log of its
    # own: two processes' import reports in one file would interleave and mis-nest.
    worker_logs = {w: tmp_path / f"{w}.log" for w in WORKERS["fulltext"]}
    with ExitStack() as logs:
        procs = [subprocess.Popen(
            worker_argv(settings, w, 1, "WARNING"), env={**env, "HF_HUB_OFFLINE": "1"},
            start_new_session=True, stdout=logs.enter_context(path.open("wb")),
            stderr=subprocess.STDOUT) for w, path in worker_logs.items()]
        try:
            # The CLI sends the tasks (no --wait: no vectors worker runs here); the worker
            # indexes the full text.
            sent = subprocess.run(
                [sys.executable, "-m", "indexer.cli.main", "ingest", str(records), "--json"],
                env=env, capture_output=True, text=True, timeout=300)
            assert sent.returncode == 0, sent.stderr[-3000:]
            wait_for(lambda: len(opensearch_docs(settings, BOX)) == MESSAGES, timeout=120,
                     message="the worker never indexed the ingested messages")
        finally:
            stop_workers(procs)

    port = free_port()
    api_log = tmp_path / "api.log"
    api = serve_process({**env, "SIDECAR_API_PORT": str(port)}, api_log)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http_ok(url + "/healthz", timeout=180, proc=api, log=api_log, what="the API")
        found = httpx.get(f"{url}/v1/mailboxes/{BOX}/search", timeout=60,
                          params={"q": "quarterly", "mode": "fulltext"},
                          headers={"Authorization": f"Bearer {TOKEN}"})
        assert found.status_code == 200 and len(found.json()["hits"]) == MESSAGES, found.text
    finally:
        stop_workers([api])

    cli = check(sent.stderr, "sidecar ingest")
    worker = {m: by for w, path in worker_logs.items()
              for m, by in check(path.read_text(errors="replace"), f"the {w} worker").items()}
    served = check(api_log.read_text(errors="replace"), "sidecar serve")
    # What they had loaded: the CLI, the workers (the batches' main process and pool child, the
    # recounts' process), the API.
    exited = loaded(reports)
    assert {"ingest", "worker", "serve"} <= {c.split()[0] for c in exited}, sorted(exited)
    assert len([c for c in exited if c.startswith("worker")]) >= 3, sorted(exited)
    for command, modules in exited.items():
        assert modules, command  # the bare API, by redis at least
        assert not [m for m in modules if m.startswith(NEVER)], (command, modules)
    # The processes did meet what the claims are about (the reports are not empty of them).
    assert "redis.observability.metrics" in set(cli.values()) & set(worker.values())
    assert "fastapi.telemetry._api" in set(served.values())


def test_the_check_catches_a_module_that_imports_opentelemetry(tmp_path: Path) -> None:
    """The reading above, on reports of Python's own, can fail: a module importing the SDK,
    and one importing only the bare API, are each named as the importer and refused."""
    for planted, imported in (("planted_sdk", "opentelemetry.sdk.trace"),
                              ("planted_api", "opentelemetry.trace")):
        (tmp_path / f"{planted}.py").write_text(f"import {imported}\n")
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {planted}"], cwd=tmp_path,
            capture_output=True, text=True, timeout=120,
            env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")})
        assert done.returncode == 0, done.stderr[-2000:]
        assert otel_importers(done.stderr)[imported] == planted
        with pytest.raises(AssertionError):
            check(done.stderr, planted)
