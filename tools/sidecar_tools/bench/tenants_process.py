"""``sidecar bench-tenants``' processes: the API and Qdrant servers it starts, and its probes.

The API starts as the other benches start it (:func:`sidecar_tools.bench.search.start_api`),
with one bench-only token for every searched mailbox. A Qdrant server per layout
(``--backend server``) is remembered with its pid, its empty RSS and its storage, which the
storage figures and the CPU seconds are measured against; a process's RSS and CPU seconds are
read from ``/proc``, the OpenSearch node's from its stats. Kept apart so that the
measurements and the storage figures share one record of what was started.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings
from search_api.auth import token_hash
from sidecar_tools.bench import search
from sidecar_tools.bench.search import ApiProcess

# --- the probes --------------------------------------------------------------------------------


def proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its children that were waited for (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


def _node_cpu_s(settings: Settings) -> float:
    stats = build_opensearch(settings).nodes.stats(metric="process")
    return float(sum(n["process"]["cpu"]["total_in_millis"]
                     for n in stats["nodes"].values())) / 1000


def cpu_seconds(settings: Settings, api_pid: int, server_pid: int | None) -> dict[str, float]:
    found = {"api": _proc_cpu_s(api_pid), "opensearch": _node_cpu_s(settings)}
    if server_pid is not None:
        found["qdrant_server"] = _proc_cpu_s(server_pid)
    return found


# --- the API -----------------------------------------------------------------------------------


def start_api(settings: Settings, mailboxes: Sequence[str], log: Path) -> ApiProcess:
    """``sidecar serve`` as :func:`search.start_api` starts it (a bench-only token, its
    per-caller limits lifted: :data:`search.BENCH_LIMITS`), with a token for every searched
    mailbox: the token that function makes reads one mailbox (here none), so this one
    replaces it in the process's environment."""
    token = "bench-" + os.urandom(12).hex()
    tokens = {"SIDECAR_API_TOKENS": json.dumps({token_hash(token): list(mailboxes)})}
    return replace(search.start_api(settings, "", 0, log, env=tokens), token=token)


# --- the Qdrant servers ------------------------------------------------------------------------

class StartedServer(NamedTuple):
    """A Qdrant server this run started: its figures are measured against these."""

    pid: int
    empty_rss: int  # the RSS of the empty server, the baseline of its collection's figures
    storage: Path


_SERVERS: dict[str, StartedServer] = {}  # by URL


@contextmanager
def qdrant_server(run_dir: Path, name: str) -> Iterator[Any]:
    from sidecar_tools.stack.qdrant_server import server_binary, start_server

    binary = server_binary()
    if binary is None:
        raise RuntimeError("bench-tenants --backend server: no Qdrant server binary "
                           "(SIDECAR_QDRANT_BIN or ../shared/tools/qdrant)")
    server = start_server(binary, (run_dir / name).resolve())
    _SERVERS[server.url] = StartedServer(server.process.pid, proc_rss(server.process.pid),
                                         (run_dir / name).resolve() / "storage")
    try:
        yield server
    finally:
        server.stop()


def settings_for_server(settings: Settings, server: Any) -> Settings:
    return settings.model_copy(update={"qdrant_url": server.url,
                                       "qdrant_grpc_port": server.grpc_port})


def started_server(settings: Settings) -> StartedServer | None:
    """The Qdrant server this run started at the settings' URL, if it did."""
    return _SERVERS.get(settings.qdrant_url or "")


def qdrant_pid(settings: Settings) -> int | None:
    """The pid of the Qdrant server this run started at the settings' URL."""
    found = started_server(settings)
    return found.pid if found else None
