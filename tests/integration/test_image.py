"""The real image (Dockerfile), built with podman and run against the local stack (issue 24).

Images from the repository's Dockerfile, on a Debian 12 base built here with debootstrap
(no registry serves base images on these machines; the base is imported once per machine and
reused): EXTRAS="" (no encoder: tailer, full-text workers, ingest, Lambda) and EXTRAS=vectors
(ONNX Runtime + the model, no torch), the latter with ONNX_FROM=context and the graph exported
on the host first (the default ONNX_FROM=export downloads torch into the build: ~3 GB); and
the compose stack's sample-mail loader (deploy/compose/sample-mail.Dockerfile).
The two sizes are printed and held under the issue's targets; then containers run with
``--network host`` against the stack: ``sidecar --version`` in the slim image; the loader
stores the sample mailbox, a full-text worker (slim image) indexes it, and the API (vectors
image: the model loads offline from the image) answers the compose docs' search with hits.

Tools: ``scripts/ensure-image-tools.sh`` (podman, runc, debootstrap, containers.conf).
Podman's layer cache (/var/lib/containers) makes a second run reuse every unchanged layer:
cold ~5 min, warm ~1 min here (docs/results/runs/2026-12-03-image.md).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from indexer.adapters import factories
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from tests.support.api_fixtures import free_port
from tests.support.pipeline_helpers import export_stream, ingest_files, prepare_tables
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BASE = "localhost/bookworm-python"  # stands in for the official python:3.11-slim-bookworm
IMAGE = "localhost/mail-search-sidecar-test"
MB = 1_000_000  # podman's unit
LIMITS = {"slim": 400 * MB, "vectors": 900 * MB}  # issue 24's targets
EXTRAS = {"slim": "", "vectors": "vectors"}
SAMPLE = "deploy/compose/sample-mail.Dockerfile"  # the compose stack's sample-mail loader
LOCK = Path(tempfile.gettempdir()) / "mail-search-sidecar-image-test.lock"
TOOLS_HINT = "run 'bash scripts/ensure-image-tools.sh' (as root) first"


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:3])}… exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def ensure_base() -> None:
    """A python 3.11 Debian 12 image from Debian's packages, as slim as the official one
    (no docs, locales, apt lists or stdlib .pyc); built once per machine (~2-3 min)."""
    if podman("image", "exists", BASE, check=False).returncode == 0:
        return
    assert shutil.which("debootstrap"), f"no debootstrap: {TOOLS_HINT}"
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        subprocess.run(
            ["debootstrap", "--variant=minbase",
             "--include=python3,python3-pip,python-is-python3,ca-certificates",
             "bookworm", str(root)],
            check=True, capture_output=True, timeout=1200,
        )
        subprocess.run(
            "rm -rf var/cache/apt/*.bin var/cache/apt/archives/*.deb var/lib/apt/lists/* "
            "usr/share/doc/* usr/share/locale/* usr/share/man/* "
            "usr/lib/python3.11/EXTERNALLY-MANAGED "  # pip installs system-wide, as in python:*
            "&& find usr/lib/python3* -name __pycache__ -type d -prune -exec rm -rf {} +",
            shell=True, cwd=root, check=True, timeout=120,
        )
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["podman", "import", "--change", "ENV LANG=C.UTF-8", "--change", 'CMD ["python3"]',
             "-", BASE],
            stdin=tar.stdout, capture_output=True, text=True, timeout=600,
        )
        assert tar.wait() == 0 and imported.returncode == 0, imported.stderr


def export_graph() -> None:
    """The model's ONNX graphs (int8 and float32) into build/onnx (ONNX_FROM=context), exported
    with the dev environment's torch; a no-op (~1 s) when the graphs of the locked weights are
    there."""
    out = ROOT / "build" / "onnx"
    done = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "export-onnx", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    # the int8 graph (the default encoder's) and the float32 one, one path a line
    graphs = {Path(line).resolve() for line in done.stdout.strip().splitlines()}
    for stale in out.glob("*.onnx"):  # other weights' graphs would only weigh on the image
        if stale.resolve() not in graphs:
            stale.unlink()


def build(name: str) -> float:
    args = ["build", "--network", "host", "--build-arg", f"PYTHON_IMAGE={BASE}",
            "-t", f"{IMAGE}:{name}"]
    if name == "sample":
        args += ["-f", str(ROOT / SAMPLE)]
    else:
        args += ["--build-arg", f"EXTRAS={EXTRAS[name]}", "--build-arg", "ONNX_FROM=context"]
    ca = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    if ca and Path(ca).is_file():  # the registries' TLS chain needs this machine's bundle
        args += ["-v", f"{ca}:/run/host-ca.pem:ro", "--build-arg", "PIP_CERT=/run/host-ca.pem",
                 "--build-arg", "SSL_CERT_FILE=/run/host-ca.pem"]
    start = time.monotonic()
    podman(*args, str(ROOT), timeout=1500)
    return time.monotonic() - start


@pytest.fixture(scope="module")
def images() -> dict[str, int]:
    """Both images built (cached layers reused); their sizes in bytes."""
    assert shutil.which("podman"), f"no podman: {TOOLS_HINT}"
    with LOCK.open("w") as lock:  # one build at a time on a machine (same tags, same cache)
        fcntl.flock(lock, fcntl.LOCK_EX)
        start = time.monotonic()
        ensure_base()
        based = time.monotonic()
        export_graph()
        took = {name: build(name) for name in (*EXTRAS, "sample")}
    print(f"\nimage test: base {based - start:.0f} s, "
          + ", ".join(f"build {n} {s:.0f} s" for n, s in took.items()))
    return {
        name: int(podman("image", "inspect", f"{IMAGE}:{name}", "--format", "{{.Size}}")
                  .stdout.strip())
        for name in took
    }


def test_image_sizes(images: dict[str, int]) -> None:
    for name in EXTRAS:
        print(f"image {IMAGE}:{name} (EXTRAS={EXTRAS[name]!r}): {images[name] / MB:.0f} MB "
              f"(limit {LIMITS[name] / MB:.0f} MB)")
    print(f"image {IMAGE}:sample ({SAMPLE}): {images['sample'] / MB:.0f} MB")
    for name in EXTRAS:
        assert images[name] < LIMITS[name], f"{name}: {images[name] / MB:.0f} MB"


def test_slim_image_runs_the_cli(images: dict[str, int]) -> None:
    done = podman("run", "--rm", "--network", "none", f"{IMAGE}:slim", "sidecar", "--version")
    assert done.stdout.startswith("sidecar "), done.stdout
    # no encoder in it (EXTRAS="")
    done = podman("run", "--rm", "--network", "none", f"{IMAGE}:slim", "python", "-c",
                  "import importlib.util as u; print([m for m in ('torch', 'onnxruntime', "
                  "'sentence_transformers', 'transformers') if u.find_spec(m)])")
    assert done.stdout.strip() == "[]", done.stdout


def test_vectors_image_has_no_torch(images: dict[str, int]) -> None:
    done = podman("run", "--rm", "--network", "none", f"{IMAGE}:vectors", "python", "-c",
                  "import importlib.util as u; print([m for m in ('torch', 'onnxruntime', "
                  "'sentence_transformers', 'transformers', 'tokenizers') if u.find_spec(m)])")
    assert done.stdout.strip() == "['onnxruntime', 'tokenizers']", done.stdout


class Containers:
    """Detached containers on the host's network, with this test's settings (its tables,
    index, queues) and a data directory at /data; removed at the end."""

    def __init__(self, settings: Settings, data: Path) -> None:
        self.env = to_env(settings) | {"SIDECAR_QDRANT_PATH": "/data/qdrant",
                                       "SIDECAR_STATE_DIR": "/data/state"}
        self.data, self.names = data, []  # type: Path, list[str]

    def start(self, image: str, *command: str, env: dict[str, str] | None = None) -> str:
        name = f"sidecar-test-{uuid.uuid4().hex[:8]}"
        env_file = self.data.parent / f"{name}.env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in (self.env | (env or {})).items()))
        podman("run", "-d", "--name", name, "--network", "host", "--env-file", str(env_file),
               "-v", f"{self.data}:/data", f"{IMAGE}:{image}", *command)
        self.names.append(name)
        return name

    def running(self, name: str) -> bool:
        state = podman("inspect", name, "--format", "{{.State.Running}}", check=False)
        if state.stdout.strip() != "true":
            raise AssertionError(f"container {name} exited:\n{self.logs(name)}")
        return True

    def logs(self, name: str) -> str:
        done = podman("logs", name, check=False)
        return (done.stdout + done.stderr)[-4000:]

    def remove(self) -> None:
        for name in self.names:
            podman("rm", "-f", "-t", "10", name, check=False, timeout=60)


@pytest.fixture
def containers(settings: Settings, tmp_path: Path) -> Iterator[Containers]:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o777)  # the image's user (uid 10001) writes there
    made = Containers(settings, data)
    try:
        yield made
    finally:
        made.remove()


def test_sample_mail_worker_and_api_containers(
    images: dict[str, int], settings: Settings, containers: Containers, tmp_path: Path
) -> None:
    """The compose stack's path, with the stack's engines: the sample-mail job stores the
    sample mailbox, a full-text worker (slim image) indexes it, the API (vectors image) answers
    the README's compose search with hits. (The tailer's part, stream to queue, is the host's
    ingest here.)"""
    mailbox = "demo@example.com"
    token = "token-image-" + uuid.uuid4().hex
    port = free_port()
    api_env = {
        "SIDECAR_API_PORT": str(port),
        "SIDECAR_API_METRICS_PORT": str(free_port()),
        "SIDECAR_API_TOKENS": json.dumps({token_hash(token): [mailbox]}),
    }
    prepare_tables(settings)
    loader = containers.start("sample")  # its CMD: sidecar load <the sample> --mailbox demo@…
    done = podman("wait", loader, timeout=300)
    assert done.stdout.strip() == "0", containers.logs(loader)

    # the API owns the embedded vector store (as `sidecar serve` does in tests/support/api_fixtures.py)
    api = containers.start("vectors", "sidecar", "serve", env=api_env)
    worker = containers.start("slim", "sidecar", "worker", "--role", "fulltext",
                              "--loglevel", "WARNING")
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        containers.running(api)
        try:
            return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(ready, timeout=240, interval=1, message=lambda: "API not ready:\n"
             + containers.logs(api))
    containers.running(worker)

    records = tmp_path / "stream.jsonl"
    assert export_stream(settings, records) > 0
    summary = ingest_files(settings, [str(records)], timeout=300)
    assert summary.dead_lettered == 0 and summary.applied > 0, (
        f"{summary}\n{containers.logs(worker)}")
    factories.fulltext_index(settings).refresh()

    answer = httpx.get(f"{url}/v1/mailboxes/{mailbox}/search",
                       params={"q": "budget", "mode": "hybrid"},
                       headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert answer.status_code == 200, f"{answer.text}\n{containers.logs(api)}"
    hits = answer.json()["hits"]
    assert hits and any("budget" in json.dumps(h).lower() for h in hits), hits
    print(f"compose search (q=budget, hybrid): {len(hits)} hits, first {hits[0]['subject']!r}")
