"""A real Qdrant server for tests and benchmarks: the binary in ``../shared/tools/qdrant/``
(or the one ``SIDECAR_QDRANT_BIN`` names), started on free loopback ports with its own storage.

Users' machines have no such binary (they run Qdrant's image or Qdrant Cloud): where none
exists, the tests that need one are not collected, and the session says so in one line
(see ``tests/conftest.py``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DEFAULT_BIN = Path(__file__).resolve().parents[4] / "shared" / "tools" / "qdrant" / "qdrant"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_binary() -> Path | None:
    named = os.environ.get("SIDECAR_QDRANT_BIN")
    path = Path(named) if named else DEFAULT_BIN
    return path if path.is_file() and os.access(path, os.X_OK) else None


@dataclass
class QdrantServer:
    """One running server; ``url`` is its HTTP address."""

    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    api_key: str | None
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(binary: Path, workdir: Path, api_key: str | None = None) -> QdrantServer:
    """Start a server and wait until ``/readyz`` answers (at most 60 s)."""
    http, grpc = free_port(), free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "QDRANT__SERVICE__HOST": "127.0.0.1",
        "QDRANT__SERVICE__HTTP_PORT": str(http),
        "QDRANT__SERVICE__GRPC_PORT": str(grpc),
        "QDRANT__STORAGE__STORAGE_PATH": str(workdir / "storage"),
        "QDRANT__STORAGE__SNAPSHOTS_PATH": str(workdir / "snapshots"),
        "QDRANT__TELEMETRY_DISABLED": "true",
    }
    if api_key:
        env["QDRANT__SERVICE__API_KEY"] = api_key
    log = workdir / "qdrant.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(binary)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=workdir
        )
    server = QdrantServer(process, http, grpc, api_key, log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"qdrant exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            ready = f"{server.url}/readyz"
            with urllib.request.urlopen(ready, timeout=2) as answer:  # noqa: S310 (http only)
                if answer.status == 200:
                    return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"qdrant did not become ready: {log.read_text()[-2000:]}")
