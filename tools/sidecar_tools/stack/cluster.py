"""A three-node OpenSearch cluster and a three-node Qdrant cluster on loopback (issue 26
part 2), for node-loss tests: each node a plain child process in its own session, with its
own data under ``<state>/cluster``. Ports come from one base (default 29200) far from the
single-node stack's (9200, 6379, 5000), which it never touches.

OpenSearch node ``n`` (0..2): HTTP ``base+n``, transport ``base+100+n``; all three are
cluster-manager-eligible data nodes with each other as seed hosts. Qdrant node ``n``: HTTP
``base+200+10n``, gRPC ``+1``, P2P ``+2``; node 0 starts first with its own ``--uri``, the
others ``--bootstrap`` to it (``../shared/tools/README.md``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar_tools.stack import components, opensearch_node
from sidecar_tools.stack.qdrant_server import server_binary

NODES = 3
CLUSTER_NAME = "sidecar-cluster"


@dataclass
class ClusterStack:
    """The six processes; ``kill``/``start`` act on one node by name (``os0``, ``qd1``)."""

    state: Path
    classpath: list[Path]
    base: int = 29200
    heap: str = "512m"
    # extra JVM flags of the OpenSearch nodes (e.g. ``-XX:TieredStopAtLevel=1``: C1 only, a
    # faster start on a few busy cores, for tests that restart nodes)
    jvm: tuple[str, ...] = ()
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def os_port(self, n: int) -> int:
        return self.base + n

    def qd_port(self, n: int) -> int:
        return self.base + 200 + 10 * n

    @property
    def opensearch_url(self) -> str:
        return ",".join(f"http://127.0.0.1:{self.os_port(n)}" for n in range(NODES))

    @property
    def qdrant_url(self) -> str:
        return f"http://127.0.0.1:{self.qd_port(0)}"

    def env(self) -> dict[str, str]:
        """The settings that point the sidecar at this cluster, with its replicated layout."""
        return {"SIDECAR_OPENSEARCH_URL": self.opensearch_url, "SIDECAR_OPENSEARCH_SHARDS": "3",
                "SIDECAR_OPENSEARCH_REPLICAS": "1", "SIDECAR_QDRANT_URL": self.qdrant_url,
                "SIDECAR_QDRANT_SHARD_NUMBER": "3", "SIDECAR_QDRANT_REPLICATION_FACTOR": "2"}

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        logs = self.state / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env={**os.environ, **(env or {})}, cwd=self.state)

    def start(self, name: str) -> None:
        """Start (or restart, with the same data) one node."""
        n = int(name[2:])
        if name.startswith("os"):
            seeds = ",".join(f"127.0.0.1:{self.base + 100 + i}" for i in range(NODES))
            managers = ",".join(f"os{i}" for i in range(NODES))
            argv = opensearch_node.command(self.classpath, self.state / name, self.os_port(n),
                                           CLUSTER_NAME, self.heap)
            argv[1:1] = self.jvm
            argv += ["--node-name", name, "--setting", f"transport.port={self.base + 100 + n}",
                     "--setting", f"discovery.seed_hosts={seeds}",
                     "--setting", f"cluster.initial_cluster_manager_nodes={managers}"]
            self._spawn(name, argv)
            return
        binary = server_binary()
        if binary is None:
            raise RuntimeError("no Qdrant server binary (../shared/tools/qdrant)")
        port = self.qd_port(n)
        env = {"QDRANT__SERVICE__HOST": "127.0.0.1", "QDRANT__SERVICE__HTTP_PORT": str(port),
               "QDRANT__SERVICE__GRPC_PORT": str(port + 1), "QDRANT__CLUSTER__ENABLED": "true",
               "QDRANT__CLUSTER__P2P__PORT": str(port + 2), "QDRANT__TELEMETRY_DISABLED": "true",
               "QDRANT__STORAGE__STORAGE_PATH": str(self.state / name / "storage"),
               "QDRANT__STORAGE__SNAPSHOTS_PATH": str(self.state / name / "snap")}
        uri = ["--uri", f"http://127.0.0.1:{port + 2}"]
        first = ["--bootstrap", f"http://127.0.0.1:{self.qd_port(0) + 2}"] if n else []
        # A restarted node keeps its raft state: it rejoins without --bootstrap.
        restart = (self.state / name / "storage" / "raft_state.json").exists()
        self._spawn(name, [str(binary), *(uri if restart else first + uri)], env)

    def kill(self, name: str) -> None:
        """SIGKILL one node (its whole session) and reap it."""
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def up(self, timeout_s: float = 240.0) -> None:
        self.start("qd0")
        _wait(lambda: _ok(f"{self.qdrant_url}/readyz"), timeout_s, "qd0")
        for n in range(1, NODES):
            self.start(f"qd{n}")
        for n in range(NODES):
            self.start(f"os{n}")
        self.wait_green(timeout_s)
        for n in range(NODES):
            _wait(lambda n=n: _ok(f"http://127.0.0.1:{self.qd_port(n)}/readyz"),
                  timeout_s, f"qd{n}")
        _wait(lambda: _peers(self.qdrant_url) == NODES, timeout_s, "qdrant peers")

    def wait_green(self, timeout_s: float = 240.0, nodes: int = NODES) -> None:
        """Until some node reports every node joined and every shard copy assigned."""
        def green() -> bool:
            for n in range(NODES):
                health = _get(f"http://127.0.0.1:{self.os_port(n)}/_cluster/health")
                if health is not None:
                    return bool(health["status"] == "green" and
                                health["number_of_nodes"] == nodes)
            return False
        _wait(green, timeout_s, "opensearch green")

    def down(self) -> None:
        for name in list(self.procs):
            self.kill(name)


def ports(base: int) -> list[int]:
    """The 15 loopback ports of a cluster stack on ``base`` (the layout of the docstring)."""
    found = [base + n for n in range(NODES)] + [base + 100 + n for n in range(NODES)]
    return found + [base + 200 + 10 * n + k for n in range(NODES) for k in range(3)]


def free_base(bases: Sequence[int]) -> int:
    """The first of ``bases`` none of whose ports is taken: tests and benchmarks each start a
    cluster stack of their own, possibly beside one another."""
    for base in bases:
        if all(components.port_free(p) for p in ports(base)):
            return base
    raise RuntimeError(f"no free cluster port base among {tuple(bases)}")


def _ok(url: str) -> bool:
    """The URL answers 200 (``/readyz`` answers plain text)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (loopback)
            return bool(answer.status == 200)
    except OSError:
        return False


def _peers(url: str) -> int:
    """Peers the Qdrant node at ``url`` knows (0 while it does not answer)."""
    found: Any = _get(f"{url}/cluster") or {}
    return len(found.get("result", {}).get("peers", {}))


def _get(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (loopback)
            found = json.loads(answer.read())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _wait(ready: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready within {timeout_s:.0f} s")
        time.sleep(0.5)
