"""A Redis Sentinel group on loopback (issue 26 part 4), for broker-failover tests: a primary,
one replica and three Sentinels, each a plain child process in its own session with its own
directory under ``<state>`` — the same ``redis-server`` binary as the single-node stack
(``redis-server <conf> --sentinel`` runs a Sentinel).

Ports come from one base (default 29600), far from the single-node stack's (9200, 6379, 5000)
and the cluster stack's (29200-29422): Redis ``r0`` (the first primary) ``base``, ``r1`` (its
replica) ``base+1``; Sentinels ``s0``-``s2`` ``base+10``..``base+12``. The Sentinels watch the
master ``sidecar`` with a quorum of 2 and declare it down after 1 s without an answer (a
production group keeps the default 30 s or a few seconds: the tests want a prompt failover).

Both Redis nodes keep an AOF (``appendfsync everysec``, as the single-node stack); replication
is asynchronous, so a failover can lose the last writes the replica had not received yet —
what the failover test measures the pipeline against.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from sidecar_tools.stack.components import _redis_binary, port_free

MASTER = "sidecar"
REDIS_NODES = ("r0", "r1")
SENTINELS = ("s0", "s1", "s2")
QUORUM = 2
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 10_000


@dataclass
class SentinelStack:
    """The five processes; ``kill``/``start`` act on one by name (``r0``, ``s1``)."""

    state: Path
    base: int = 29600
    master_name: str = MASTER
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def port(self, name: str) -> int:
        n = int(name[1:])
        return self.base + n if name.startswith("r") else self.base + 10 + n

    @property
    def url(self) -> str:
        """``SIDECAR_REDIS_URL``: every Sentinel, database 0."""
        return ";".join(f"sentinel://127.0.0.1:{self.port(s)}" for s in SENTINELS) + "/0"

    def env(self) -> dict[str, str]:
        """The settings that point the sidecar at this group."""
        return {"SIDECAR_REDIS_URL": self.url, "SIDECAR_REDIS_SENTINEL_MASTER": self.master_name}

    def client(self, name: str) -> redis.Redis:
        """A plain client of one process (a Redis node or a Sentinel)."""
        return redis.Redis(host="127.0.0.1", port=self.port(name), socket_timeout=2,
                           socket_connect_timeout=1)

    # -- processes -------------------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> None:
        logs = self.state / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=self.state)

    def start(self, name: str) -> None:
        """Start (or restart, with the same data and configuration) one process. ``r1`` starts
        as ``r0``'s replica the first time; a restarted node (say the old primary) starts as
        a primary of its own and is turned into a replica by the Sentinels."""
        directory = self.state / name
        directory.mkdir(parents=True, exist_ok=True)
        port = self.port(name)
        if name.startswith("s"):
            conf = directory / "sentinel.conf"
            if not conf.exists():  # a Sentinel rewrites its file: a restart keeps what it knew
                conf.write_text(_sentinel_conf(port, directory, self.master_name,
                                               self.port("r0")))
            self._spawn(name, [_redis_binary(), str(conf), "--sentinel"])
            return
        argv = [_redis_binary(), "--bind", "127.0.0.1", "--port", str(port),
                "--dir", str(directory), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "no"]
        first = not (directory / "appendonlydir").exists()
        if name != "r0" and first:
            argv += ["--replicaof", "127.0.0.1", str(self.port("r0"))]
        self._spawn(name, argv)

    def kill(self, name: str) -> None:
        """SIGKILL one process (its whole session) and reap it."""
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def up(self, timeout_s: float = 60.0) -> None:
        """Start the group and wait until every Sentinel sees the master, its replica and
        the two other Sentinels."""
        for name in REDIS_NODES:
            self.start(name)
        _wait(lambda: self._role("r1") == ("slave", "connected"), timeout_s, "replication")
        for name in SENTINELS:
            self.start(name)
        _wait(self._formed, timeout_s, "sentinels")

    def down(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    # -- state -----------------------------------------------------------------------------
    def master_port(self) -> int | None:
        """The master's port as a majority of the answering Sentinels name it (None: no
        majority, or none answers)."""
        seen: dict[int, int] = {}
        for name in SENTINELS:
            if name not in self.procs:
                continue
            try:
                found = self.client(name).sentinel_get_master_addr_by_name(self.master_name)
            except redis.RedisError:
                continue
            if isinstance(found, tuple):
                seen[int(found[1])] = seen.get(int(found[1]), 0) + 1
        best = max(seen.items(), key=lambda kv: kv[1], default=None)
        return best[0] if best and best[1] >= QUORUM else None

    def wait_failover(self, old_port: int, timeout_s: float = 60.0) -> int:
        """Until the Sentinels name another master and it answers as one; its port."""
        def promoted() -> bool:
            port = self.master_port()
            return port not in (None, old_port) and self._role(self._name(port)) == (
                "master", None)
        _wait(promoted, timeout_s, "failover")
        port = self.master_port()
        assert port is not None
        return port

    def wait_replica(self, name: str, timeout_s: float = 60.0) -> None:
        """Until ``name`` replicates the current master with its link up."""
        _wait(lambda: self._role(name) == ("slave", "connected"), timeout_s, f"{name} replica")

    def _name(self, port: int | None) -> str:
        return next((n for n in REDIS_NODES if self.port(n) == port), "?")

    def _role(self, name: str) -> tuple[str, str | None] | None:
        """(``master``, None) or (``slave``, link state); None when it does not answer."""
        if name not in self.procs:
            return None
        try:
            info: dict[str, Any] = self.client(name).info("replication")
        except redis.RedisError:
            return None
        role = str(info.get("role"))
        if role == "master":
            return (role, None)
        return (role, "connected" if info.get("master_link_status") == "up" else "down")

    def _formed(self) -> bool:
        for name in SENTINELS:
            try:
                master = self.client(name).sentinel_master(self.master_name)
            except redis.RedisError:
                return False
            if not isinstance(master, dict) or (int(master.get("num-slaves", 0)) < 1
                    or int(master.get("num-other-sentinels", 0)) < len(SENTINELS) - 1):
                return False
        return True


def _sentinel_conf(port: int, directory: Path, master: str, primary_port: int) -> str:
    return "\n".join([
        f"port {port}",
        "bind 127.0.0.1",
        "daemonize no",
        f'dir "{directory}"',
        'logfile ""',
        f"sentinel monitor {master} 127.0.0.1 {primary_port} {QUORUM}",
        f"sentinel down-after-milliseconds {master} {DOWN_AFTER_MS}",
        f"sentinel failover-timeout {master} {FAILOVER_TIMEOUT_MS}",
        f"sentinel parallel-syncs {master} 1",
        "",
    ])


def _wait(ready: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready within {timeout_s:.0f} s")
        time.sleep(0.1)


def free_base(low: int = 29600, high: int = 32000, step: int = 20) -> int:
    """The first base from ``low`` whose five ports are free on loopback (two test runs at
    once, or a group left by a killed run, do not clash)."""
    for base in range(low, high, step):
        if all(port_free(p) for p in (base, base + 1, base + 10, base + 11, base + 12)):
            return base
    raise RuntimeError(f"no free ports for a Sentinel group in {low}-{high}")
