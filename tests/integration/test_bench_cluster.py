"""``sidecar bench-cluster`` at a tiny size on the real stacks (issue 26 part 5): the local
single-node stack with a Qdrant server of its own, and a cluster stack (3 OpenSearch + 3
Qdrant nodes) the run starts and shuts down. Asserted: every figure of the report comes from
a measurement — both stacks hold every copy, with the cluster's layout really replicated;
every search mode answered on both with each client count; every indexing run applied the
whole subset — and the Markdown rows print those figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.settings import Settings
from sidecar_tools.bench.cluster_bench import STACKS, ClusterBenchOptions, run
from sidecar_tools.bench.cluster_report import markdown
from sidecar_tools.bench.search import MODES
from tests.conftest import CORPORA

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.qdrant_server,
              pytest.mark.timeout(600)]


def test_bench_cluster_measures_both_stacks(settings: Settings) -> None:
    opts = ClusterBenchOptions(CORPORA / "linux-mips-4k.jsonl.gz", messages=60, copies=1, search_seconds=1.0,
                               clients=(1, 8), index_messages=40, processes=(1, 2),
                               workdir=Path(".sidecar/bench"), heap="512m")
    result = run(opts, settings, print)
    n, writes = result["messages"], result["writes"]
    assert writes["single_indexed"] == writes["cluster_indexed"] == 2 * n
    assert writes["single_documents"]["items"] == n and writes["cluster_documents"]["items"] == 2 * n
    points = writes["source_points"]
    assert points > 0 and writes["single_points"]["items"] == points
    assert writes["cluster_points"]["items"] == 2 * points
    assert all(writes[f"{s}_{k}"]["per_s"] > 0 for s in STACKS for k in ("documents", "points"))
    assert writes["cluster_layout"]["opensearch_shards"] == 3
    assert writes["cluster_layout"]["opensearch_replicas"] == 1
    assert {"shards": 3, "replicas": 2} in writes["cluster_layout"]["qdrant"]
    assert writes["single_layout"]["opensearch_replicas"] == 0
    for stack in STACKS:
        for clients in ("1", "8"):
            for mode in MODES:
                lat = result["search"][stack][clients][mode]
                assert lat["calls"] > 0 and lat["errors"] == 0, (stack, clients, mode, lat)
                assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"]
        runs = result["indexing"][stack]
        assert [r["processes"] for r in runs] == [1, 2]
        for r in runs:
            assert r["messages"] == result["index_messages"] and r["dead_lettered"] == 0
            assert r["embedded"] > 0 and r["messages_per_s"] > 0, (stack, r)
    table = markdown(result, cores=2)
    print(table)
    lat = result["search"]["cluster"]["8"]["semantic"]
    assert f"| cluster (3+3) | 8 | semantic | {lat['p50_ms']:,.1f} |" in table
    one = result["indexing"]["single"][1]
    assert f"| 2 | single node | {one['messages']} | {one['seconds']:.1f} |" in table
