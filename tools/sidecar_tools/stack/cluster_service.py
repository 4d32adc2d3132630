"""The cluster stack (:mod:`.cluster`) as a standing service: ``sidecar stack up --cluster``
leaves its six nodes running after the command returns, ``stack env --cluster`` prints the
settings that point the sidecar at them, ``stack down --cluster`` stops them.

The nodes run in sessions of their own (``ClusterStack``), so they outlive the command; what
``down`` needs is in ``<state_dir>/cluster/nodes.json``: the port base and each node's pid
with its start time, so that a pid the kernel has since given to another process is never
signalled. The data is not kept: ``down`` removes it (a test cluster; a Qdrant node's raft
state names its peers' ports, so a later ``up`` on another base could not reuse it). The
single-node stack (:mod:`.manager`) is never touched, and its ports never used.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from sidecar_tools.stack import components, opensearch_node
from sidecar_tools.stack.cluster import ClusterStack, free_base
from sidecar_tools.stack.settings import StackSettings

# Away from the single-node stack (9200, 6379, 5000) and from the cluster stacks that tests
# and ``bench-cluster`` start for themselves (22200-31200), below the ephemeral ports.
BASES = (21200, 20200, 19200)


@dataclass(frozen=True)
class Node:
    name: str
    pid: int
    started: int  # /proc/<pid>/stat field 22: tells this process from a later one


def _home(settings: StackSettings) -> Path:
    return settings.state_dir.resolve() / "cluster"


def _record(settings: StackSettings) -> tuple[int, list[Node]] | None:
    path = _home(settings) / "nodes.json"
    if not path.exists():
        return None
    found = json.loads(path.read_text(encoding="utf-8"))
    return int(found["base"]), [Node(**n) for n in found["nodes"]]


def _started(pid: int) -> int | None:
    """The process's start time; None when it is gone or a zombie (dead, not yet reaped)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the name may hold spaces and parens
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _alive(node: Node) -> bool:
    return _started(node.pid) == node.started


def running(settings: StackSettings) -> ClusterStack | None:
    """The standing cluster when every one of its nodes is still alive, else None."""
    found = _record(settings)
    if found is None or not all(_alive(n) for n in found[1]):
        return None
    return ClusterStack(_home(settings), [], base=found[0])


def up(settings: StackSettings, heap: str = "512m", timeout_s: float = 300.0) -> ClusterStack:
    """Start the cluster (or find it running) and wait until both engines have three nodes:
    OpenSearch green, three Qdrant peers. Idempotent; a half-dead one is replaced."""
    existing = running(settings)
    if existing is not None:
        return existing
    down(settings)
    classpath = opensearch_node.prepare(components.opensearch_cache_dir(settings))
    stack = ClusterStack(_home(settings), classpath, base=free_base(BASES), heap=heap)
    try:
        stack.up(timeout_s)
    except BaseException:
        stack.down()
        raise
    nodes = [Node(name, p.pid, _started(p.pid) or 0) for name, p in stack.procs.items()]
    (_home(settings) / "nodes.json").write_text(
        json.dumps({"base": stack.base, "nodes": [n.__dict__ for n in nodes]}), encoding="utf-8")
    return stack


def down(settings: StackSettings, grace_s: float = 30.0) -> list[str]:
    """Stop the standing cluster's nodes (SIGTERM, SIGKILL after ``grace_s``) and remove its
    data; the names of the nodes stopped. Safe to run twice."""
    found = _record(settings)
    live = [n for n in (found[1] if found else []) if _alive(n)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for node in filter(_alive, live):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, sig)  # each node leads a session (and group) of its own
        deadline = time.monotonic() + grace_s
        while any(_alive(n) for n in live) and time.monotonic() < deadline:
            time.sleep(0.2)
    shutil.rmtree(_home(settings), ignore_errors=True)
    return [n.name for n in live]


def env_lines(stack: ClusterStack) -> list[str]:
    """``export`` lines for the cluster's settings (the replicated layout of ``env()``)."""
    return [f"export {key}={value}" for key, value in stack.env().items()]
