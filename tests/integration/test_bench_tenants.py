"""A small ``sidecar bench-tenants`` on the real stack: the structure, not the latencies.

2,000 messages of the repository's linux-mips-4k corpus over 200 mailboxes (a whale of 200,
mid-size and tail mailboxes), in an index of four primaries and an Edge collection of the
int8 / per-tenant-graph layout: every search of every class and mode that asks OpenSearch ran
on one shard, every class was answered in every mode, the vector search finds the exact top
10 of each mailbox (recall >= 0.99), and the storage figures the capacity model reads exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.settings import Settings
from sidecar_tools.bench.tenants import CLASSES, MODES, TenantOptions, run

pytestmark = [pytest.mark.stack, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpora" / "linux-mips-4k.jsonl.gz"


def test_small_tenant_bench_has_the_structure(tmp_path: Path) -> None:
    opts = TenantOptions(CORPUS, messages=2_000, mailboxes=200, distinct=60, shards=4,
                         search_seconds=0, queries=4, compare_float32=False, workdir=tmp_path)
    result = run(opts, Settings(), lambda _line: None)
    assert result["documents"] == 2_000
    assert result["points"] > 1_900  # messages without text have no point
    sizes = result["mailbox_sizes"]
    assert sizes["whale"] == 200 and sizes["whale"] > sizes["mid"] >= sizes["small"] >= 1
    for cls in CLASSES:
        for mode in MODES:
            row = result["shards"][f"{mode}/{cls}"]
            assert row["errors"] == 0, (mode, cls, row)
            # a tail mailbox of a few messages in one or two threads may have nothing
            # "similar" outside the liked message's thread: an empty answer is an answer there
            if not (mode == "similar" and cls == "small"):
                assert row["answered"] >= 1, (mode, cls, row)
            if mode == "semantic":  # Qdrant only
                assert row["opensearch_searches"] == 0, row
            else:
                assert row["opensearch_searches"] >= row["requests"], row
                assert row["one_shard_fraction"] == 1.0 and row["max_shards"] == 1, row
        assert result["recall"]["int8"][cls]["recall_at_10"] >= 0.99, result["recall"]
        assert result["recall"]["int8"][cls]["queries"] >= 1
    assert result["opensearch"]["shards"] == 4
    assert result["opensearch"]["store_bytes_per_message"] > 0
    assert result["qdrant"]["int8"]["disk_bytes_per_point"] > 0
    assert "latency" not in result  # search_seconds 0: structure only
