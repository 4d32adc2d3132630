"""The tables of ``sidecar bench-cluster`` (Markdown), from its JSON figures only.

Every cell is a measured value of the run or a ratio of two of them; the one derived figure,
core-seconds per message, is the machine's cores times the wall seconds per message: what one
message cost on this machine with everything (engines, workers, moto, the API) sharing its
cores — a cost to scale from, not a promise of what more cores give.
"""

from __future__ import annotations

import os
from typing import Any

from sidecar_tools.bench.search import MODES

STACK_NAMES = {"single": "single node", "cluster": "cluster (3+3)"}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "–"


def _layout(found: dict[str, Any]) -> str:
    qdrant = ", ".join(f"{q['shards']} x {q['replicas']}" for q in found["qdrant"])
    return (f"OpenSearch {found['opensearch_shards']} shard(s) x "
            f"{found['opensearch_replicas'] + 1} copies, Qdrant collections {qdrant} "
            "(shards x copies)")


def search_table(result: dict[str, Any]) -> list[str]:
    lines = ["| stack | clients | mode | p50 (ms) | p95 | p99 | req/s | requests | errors |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for stack, name in STACK_NAMES.items():
        for clients, modes in result["search"][stack].items():
            if not isinstance(modes, dict):
                continue  # api_rss_mib
            for mode in MODES:
                lat = modes[mode]
                lines.append(f"| {name} | {clients} | {mode} | {lat['p50_ms']:,.1f} | "
                             f"{lat['p95_ms']:,.1f} | {lat['p99_ms']:,.1f} | {lat['rps']:.1f} | "
                             f"{lat['calls']} | {lat['errors']} |")
    return lines


def writes_table(result: dict[str, Any]) -> list[str]:
    writes = result["writes"]
    lines = ["| backend | single node: items, s, per s | cluster: items, s, per s "
             "| cluster / single |", "|---|---:|---:|---:|"]
    for kind, label in (("documents", "OpenSearch `_bulk` (docs)"),
                        ("points", "Qdrant upsert (points)")):
        one, many = writes[f"single_{kind}"], writes[f"cluster_{kind}"]
        lines.append(f"| {label} | {one['items']:,}, {one['seconds']:.1f}, "
                     f"**{one['per_s']:,.0f}** | {many['items']:,}, {many['seconds']:.1f}, "
                     f"**{many['per_s']:,.0f}** | {_ratio(many['per_s'], one['per_s'])} |")
    return lines


def indexing_table(result: dict[str, Any], cores: int) -> list[str]:
    lines = [f"| processes per role | stack | messages | s | msgs/s | core-s per message "
             f"({cores} cores) | embed s (worker-timed) | warm-up s | dead letters |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    runs = result["indexing"]
    for at in range(len(runs["single"])):
        for stack, name in STACK_NAMES.items():
            r = runs[stack][at]
            per_s = r["messages_per_s"]
            core_s = f"{cores / per_s:.3f}" if per_s else "–"
            lines.append(f"| {r['processes']} | {name} | {r['messages']} | {r['seconds']:.1f} | "
                         f"**{per_s:.1f}** | {core_s} | {r['embed_s']:.1f} | {r['warm_s']:.1f} | "
                         f"{r['dead_lettered']} |")
    return lines


def markdown(result: dict[str, Any], cores: int | None = None) -> str:
    """The three tables with their one-line headers."""
    cores = cores or os.cpu_count() or 1
    writes, source = result["writes"], result["pipeline"]
    loads = "; ".join(f"{phase} {value}" for phase, value in
                      result.get("load_average", {}).items())
    head = (f"{result['messages']:,} messages through the pipeline, copied into "
            f"{result['copies']} other mailboxes: single node {writes['single_indexed']:,} "
            f"documents, cluster {writes['cluster_indexed']:,}; the source indexing ran at "
            f"{source['messages_per_s']:.1f} msgs/s (1 process per role, single node). "
            f"Layouts: {_layout(writes['single_layout'])} (single node), "
            f"{_layout(writes['cluster_layout'])} (cluster). "
            f"Load averages (1, 5, 15 min) after each phase: {loads}.")
    return "\n".join([
        head, "", "Search through the API:", "", *search_table(result), "",
        "Writes (the same documents and points into each stack):", "",
        *writes_table(result), "",
        f"Indexing {result['index_messages']} messages end to end (`ingest --wait`, both "
        "indexes):", "", *indexing_table(result, cores), ""])
