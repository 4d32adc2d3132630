"""``sidecar bench-tenants``' measurements through the API: shards, latency, CPU, a purge.

Per mailbox class and mode, with the queries drawn from the searched mailboxes' own messages
(:func:`workloads`): how many shards each OpenSearch search ran on (the API behind a
:class:`~sidecar_tools.bench.shard_probe.ShardProbe`), p50/p95/p99 with one client and the
throughput and CPU seconds per request with many, and the other mailboxes' p99 before, during
and after a purge of the whale. Reads only: what it measures was built before it runs.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings, to_env
from sidecar_tools.bench import queries
from sidecar_tools.bench.search import ApiProcess, stop_api
from sidecar_tools.bench.shard_probe import ShardProbe, one_shard_fraction
from sidecar_tools.bench.tenants_build import Built
from sidecar_tools.bench.tenants_options import MODES, Log, TenantOptions
from sidecar_tools.bench.tenants_process import cpu_seconds, start_api
from sidecar_tools.bench.timing import closed_loop, percentile

PAGE = 20
PURGE_WINDOW_S = 60.0


@dataclass(frozen=True)
class ClassWork:
    mailbox: str
    inputs: dict[str, list[str]]  # mode -> queries (similar: message keys)


def workloads(built: Built, count: int) -> dict[str, ClassWork]:
    out = {}
    for cls, mailbox in built.mailboxes.items():
        own = built.messages[cls]
        out[cls] = ClassWork(mailbox, {
            "fulltext": queries.fulltext_queries(own, mailbox, count),
            "semantic": queries.free_text_queries(own, mailbox, count),
            "hybrid": queries.free_text_queries(own, mailbox, count),
            "similar": queries.similar_keys(own, mailbox, count),
        })
    return out


def _caller(api: ApiProcess, work: ClassWork, mode: str,
            answered: list[int] | None = None) -> Callable[[Any], bool]:
    """One API request of ``mode`` on the class's mailbox; ``answered`` counts the requests
    that returned at least one hit."""
    local = threading.local()
    base = f"{api.url}/v1/mailboxes/{work.mailbox}"

    def call(arg: str) -> bool:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(
                headers={"Authorization": f"Bearer {api.token}"}, timeout=120)
        if mode == "similar":
            response = client.get(f"{base}/messages/{arg}/similar", params={"limit": PAGE})
        else:
            response = client.get(f"{base}/search", params={"q": arg, "mode": mode,
                                                            "limit": PAGE})
        if response.status_code != 200:
            return False
        if answered is not None and response.json().get("hits"):
            answered[0] += 1
        return True

    return call


def probe_shards(settings: Settings, work: Mapping[str, ClassWork], run_dir: Path,
                 log: Log) -> dict[str, Any]:
    """Every query of every class and mode once, through an API whose OpenSearch is a
    :class:`ShardProbe`: shards per search, and whether each class was answered."""
    probe = ShardProbe(settings.opensearch_url)
    api = start_api(settings.model_copy(update={"opensearch_url": probe.url}),
                    [w.mailbox for w in work.values()], run_dir / "api-probe.log")
    out: dict[str, Any] = {}
    try:
        for cls, w in work.items():
            for mode in MODES:
                answered, errors = [0], 0
                call = _caller(api, w, mode, answered)
                probe.take()
                for arg in w.inputs[mode]:
                    errors += 0 if call(arg) else 1
                seen = probe.take()
                out[f"{mode}/{cls}"] = {
                    "requests": len(w.inputs[mode]), "errors": errors,
                    "answered": answered[0], "opensearch_searches": len(seen),
                    "one_shard_fraction": one_shard_fraction(seen),
                    "max_shards": max((s.shards for s in seen), default=0)}
        log("tenants: shard probe done")
    finally:
        stop_api(api)
        probe.close()
    return out


def measure_latency(settings: Settings, work: Mapping[str, ClassWork], opts: TenantOptions,
                    run_dir: Path, server_pid: int | None, log: Log) -> dict[str, Any]:
    """Per class and mode: 1 client for ``search_seconds``, then ``clients`` clients with the
    CPU seconds the API, the OpenSearch node and a Qdrant server spent per request."""
    api = start_api(settings, [w.mailbox for w in work.values()], run_dir / "api.log")
    out: dict[str, Any] = {}
    try:
        for cls, w in work.items():
            for mode in MODES:
                call = _caller(api, w, mode)
                for arg in w.inputs[mode][:3]:  # warm-up
                    call(arg)
                one = closed_loop(call, w.inputs[mode], clients=1, seconds=opts.search_seconds)
                cpu0 = cpu_seconds(settings, api.proc.pid, server_pid)
                many = closed_loop(call, w.inputs[mode], clients=opts.clients,
                                   seconds=opts.search_seconds)
                cpu1 = cpu_seconds(settings, api.proc.pid, server_pid)
                spent = {k: cpu1[k] - cpu0[k] for k in cpu0}
                out[f"{mode}/{cls}"] = {
                    "one_client": one.as_json(), "many_clients": many.as_json(),
                    "cpu_s_per_request": {k: v / max(many.calls, 1) for k, v in spent.items()},
                }
                log(f"tenants: {mode}/{cls}: p99 {one.p99_ms:.1f} ms (1 client), "
                    f"{many.rps:.1f} req/s ({opts.clients} clients)")
    finally:
        out["api_rss_mib"] = stop_api(api)
    return out


# per class, each call of one client: (seconds into the window, ms)
Calls = dict[str, list[tuple[float, float]]]


def _search_calls(api: ApiProcess, work: Mapping[str, ClassWork], until: Callable[[], bool]
                  ) -> Calls:
    """One client searching the mid-size and small mailboxes (full text and semantic, in
    turn) until ``until()``: each answered call's start and milliseconds, per class."""
    callers = [(cls, _caller(api, work[cls], mode), work[cls].inputs[mode])
               for cls in ("mid", "small") for mode in ("fulltext", "semantic")]
    found: Calls = {"mid": [], "small": []}
    n, start = 0, time.perf_counter()
    while not until():
        cls, call, inputs = callers[n % len(callers)]
        began = time.perf_counter()
        if call(inputs[(n // len(callers)) % len(inputs)]):
            found[cls].append((began - start, (time.perf_counter() - began) * 1000))
        n += 1
    return found


def call_stats(calls: Calls, upto: float = math.inf) -> dict[str, dict[str, Any]]:
    """p50/p99 (ms), count and the ten slowest ``[seconds into the window, ms]`` (in time
    order: where a tail sits against the purge's steps) of the calls begun before ``upto``."""
    out: dict[str, dict[str, Any]] = {}
    for cls, found in calls.items():
        kept = [c for c in found if c[0] < upto]
        ms = [c[1] for c in kept]
        worst = sorted(kept, key=lambda c: c[1], reverse=True)[:10]
        out[cls] = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
                    "calls": len(ms),
                    "slowest": [[round(t, 2), round(v, 1)] for t, v in sorted(worst)]}
    return out


def _searching(api: ApiProcess, work: Mapping[str, ClassWork], until: Callable[[], bool]
               ) -> dict[str, dict[str, Any]]:
    """:func:`_search_calls`' figures per class."""
    return call_stats(_search_calls(api, work, until))


def _purge_window(opts: TenantOptions) -> float:
    """Seconds of the quiet and the after windows: a p99 of at least a minute of calls
    (about 2,500 per class), so that the ratio is not one outlier's."""
    return max(opts.search_seconds, PURGE_WINDOW_S)


def measure_purge(settings: Settings, work: Mapping[str, ClassWork], opts: TenantOptions,
                  run_dir: Path, log: Log) -> dict[str, Any]:
    """``sidecar purge`` of the whale while one client searches the others: their p99 before
    (:func:`_purge_window`), during and after (the same), and how long the purge took
    at the settings' pace (``SIDECAR_PURGE_RATE``)."""
    api = start_api(settings, [w.mailbox for w in work.values()], run_dir / "api-purge.log")
    try:
        for cls in ("mid", "small"):  # warm-up
            for mode in ("fulltext", "semantic"):
                _caller(api, work[cls], mode)(work[cls].inputs[mode][0])
        stop_at = time.monotonic() + _purge_window(opts)
        quiet = _searching(api, work, lambda: time.monotonic() > stop_at)
        env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
        began = time.perf_counter()
        with (run_dir / "purge.log").open("ab") as sink, \
                (run_dir / "purge.json").open("wb") as out:
            purge = subprocess.Popen(
                [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox",
                 work["whale"].mailbox, "--json"], env=env, stdout=out, stderr=sink)
        calls = _search_calls(api, work, lambda: purge.poll() is not None)
        duration = time.perf_counter() - began
        log(f"tenants: purge of the whale took {duration:.1f} s (exit {purge.returncode})")
        # the engines' work outlasts the purge (Qdrant's vacuum of the emptied segments,
        # OpenSearch's merges of the deletes): the same window again, after
        stop_at = time.monotonic() + _purge_window(opts)
        after = _searching(api, work, lambda: time.monotonic() > stop_at)
        left = build_opensearch(settings).count(
            index=settings.opensearch_index, routing=work["whale"].mailbox,
            body={"query": {"term": {"mailbox_id": work["whale"].mailbox}}})["count"]
        report = json.loads((run_dir / "purge.json").read_text() or "{}")
        steps = report.get("seconds", {})
        # the purge's last steps (its look at the mail table, then Redis) end the window:
        # the calls begun before them saw the engines' steps alone. On moto that look (a GSI
        # Query, Limit 1) reads and sorts the whole table; on DynamoDB it reads one item.
        last = sum(float(steps.get(k, 0.0)) for k in ("check", "dead_letters", "task_results"))
        return {"duration_s": duration, "exit_code": purge.returncode, "quiet": quiet,
                "during": call_stats(calls),
                "during_engines": call_stats(calls, duration - last - 0.2),
                "after": after, "rate_per_s": settings.purge_rate,
                "whale_documents_left": int(left), "step_seconds": steps}
    finally:
        stop_api(api)
