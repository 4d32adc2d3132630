"""``sidecar bench-tenants``' report: the summary lines and the results page's tables.

Pure: reads the dict :func:`~sidecar_tools.bench.tenants.run` returns (or its ``--json``
file) and nothing else, so a run's figures can be printed again without the stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar_tools.bench.tenants_options import CLASSES, MODES


def summary(result: Mapping[str, Any]) -> list[str]:
    """The figures a person reads first, one line each."""
    lines = [f"built {result.get('documents')} documents / {result.get('points')} points "
             f"over {result['command']['mailboxes']} mailboxes in "
             f"{result.get('build', {}).get('total_s', float('nan')):.1f} s"]
    for key, row in sorted(result.get("latency", {}).items()):
        if isinstance(row, dict) and "one_client" in row:
            one, many = row["one_client"], row["many_clients"]
            cpu = sum(row["cpu_s_per_request"].values())
            shard = result.get("shards", {}).get(key, {}).get("one_shard_fraction")
            lines.append(f"{key:18} p50 {one['p50_ms']:7.1f} p95 {one['p95_ms']:7.1f} p99 "
                         f"{one['p99_ms']:7.1f} ms | {many['rps']:6.1f} req/s, "
                         f"{cpu * 1000:6.1f} ms CPU/req | one shard: {shard}")
    for layout, found in result.get("recall", {}).items():
        lines.append(f"recall@10 {layout}: " + ", ".join(
            f"{c} {v['recall_at_10']:.3f}" for c, v in found.items()))
    if "recall_float32" in result:
        lines.append("recall@10 float32: " + ", ".join(
            f"{c} {v['recall_at_10']:.3f}" for c, v in result["recall_float32"].items()))
    for layout, found in result.get("qdrant", {}).items():
        lines.append(f"qdrant {layout}: RSS {found['rss_bytes_per_point']:.0f} B/point, "
                     f"disk {found['disk_bytes_per_point']:.0f} B/point")
    if "opensearch" in result:
        lines.append(f"opensearch: {result['opensearch']['store_bytes_per_message']:.0f} "
                     "B/message (primaries)")
    if "purge" in result:
        lines += _purge_lines(result["purge"])
    return lines


def _purge_lines(purge: Mapping[str, Any]) -> list[str]:
    """The purge's duration and the others' p99 before, during and after, with the ratio."""
    lines = [f"purge of the whale: {purge['duration_s']:.1f} s at "
             f"{purge.get('rate_per_s', 0):g}/s, exit {purge['exit_code']}"]
    nan = float("nan")
    for cls, quiet in purge.get("quiet", {}).items():
        during = purge["during"].get(cls, {}).get("p99_ms", nan)
        engines = purge.get("during_engines", {}).get(cls, {}).get("p99_ms", nan)
        after = purge.get("after", {}).get(cls, {}).get("p99_ms", nan)
        lines.append(f"  {cls}: p99 quiet {quiet['p99_ms']:.1f}, during {during:.1f} "
                     f"({during / quiet['p99_ms']:.2f}x; engines' steps {engines:.1f}, "
                     f"{engines / quiet['p99_ms']:.2f}x), after {after:.1f} ms")
    return lines


def markdown(result: Mapping[str, Any]) -> str:
    """The run's tables as the results page shows them (latency per mode x class, storage)."""
    rows = ["| mode | class (messages) | p50 | p95 | p99 (1 client) | req/s (8 clients) | "
            "CPU ms/request | one shard |", "|---|---|---:|---:|---:|---:|---:|---|"]
    sizes = result.get("mailbox_sizes", {})
    for mode in MODES:
        for cls in CLASSES:
            key = f"{mode}/{cls}"
            lat = result.get("latency", {}).get(key)
            shard = result.get("shards", {}).get(key, {})
            fraction = shard.get("one_shard_fraction")
            where = ("n/a (Qdrant only)" if fraction is None
                     else f"{fraction:.2f} of {shard.get('opensearch_searches')}")
            if lat is None:
                rows.append(f"| {mode} | {cls} ({sizes.get(cls)}) | – | – | – | – | – | {where} |")
                continue
            one, many = lat["one_client"], lat["many_clients"]
            cpu = sum(lat["cpu_s_per_request"].values()) * 1000
            rows.append(f"| {mode} | {cls} ({sizes.get(cls):,}) | {one['p50_ms']:.1f} | "
                        f"{one['p95_ms']:.1f} | {one['p99_ms']:.1f} | {many['rps']:.1f} | "
                        f"{cpu:.0f} | {where} |")
    rows += ["", "| layout | points | RSS B/point | disk B/point | recall@10 whale / mid / small "
             "| build s |", "|---|---:|---:|---:|---|---:|"]
    recalls = {"int8": result.get("recall", {}).get("int8", {}),
               "float32": result.get("recall_float32", {})}
    for layout, found in result.get("qdrant", {}).items():
        rec = " / ".join(f"{recalls[layout][c]['recall_at_10']:.3f}" for c in CLASSES
                         if c in recalls.get(layout, {}))
        build_s = found.get("build_s", result.get("build", {}).get("vectors_upsert_s", 0)
                            + result.get("build", {}).get("vectors_settle_s", 0))
        rows.append(f"| {layout} | {found.get('points', result.get('points', 0)):,} | "
                    f"{found['rss_bytes_per_point']:,.0f} | {found['disk_bytes_per_point']:,.0f} "
                    f"| {rec} | {build_s:.1f} |")
    return "\n".join(rows)
