"""The capacity model of ``sidecar plan`` (pure: indexer/core/capacity.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from indexer.core.capacity import (
    GIB,
    Measured,
    Prices,
    VendorRules,
    Workload,
    plan,
    predicted_storage,
)


def test_opensearch_storage_follows_the_vendor_formula() -> None:
    work = Workload(10_000, 1_000, 5.0)
    found = plan(work, Measured(opensearch_bytes_per_message=10_000.0, opensearch_fixed_bytes=0.0))
    index_gib = 10_000_000 * 10_000 / GIB
    assert found.opensearch.index_gib == pytest.approx(index_gib)
    assert found.opensearch.storage_gib == pytest.approx(index_gib * 2 * 1.45)
    assert found.opensearch.primaries == math.ceil(index_gib / 25)
    assert found.opensearch.shards == 2 * found.opensearch.primaries


def test_nodes_grow_with_storage_heap_and_cpu() -> None:
    small = plan(Workload(1_000, 100, 1.0))
    assert small.opensearch.data_nodes == 2  # a replica never shares its primary's node
    big = plan(Workload(1_000_000, 1_000, 1.0))  # ~9 TiB of index
    node = {n.name: n for n in Prices().opensearch_nodes}[big.opensearch.node]
    assert big.opensearch.data_nodes * node.max_storage_gib >= big.opensearch.storage_gib
    heap_shards = big.opensearch.data_nodes * min(1_000, big.opensearch.heap_gib * 25)
    assert heap_shards >= big.opensearch.shards
    busy = plan(Workload(1_000, 100, 1.0, searches=400.0))
    assert busy.opensearch.data_nodes > small.opensearch.data_nodes
    assert busy.tasks.api_vcpu > small.tasks.api_vcpu


def test_qdrant_ram_takes_the_larger_of_measured_and_the_vendor_rule() -> None:
    work = Workload(1_000, 1_000, 1.0)
    rules = VendorRules()
    lean = plan(work, Measured(qdrant_ram_bytes_per_point=10.0, qdrant_ram_fixed_bytes=0.0))
    vendor = 1_000_000 * 384 * 4 * 1.5 * 0.25 / GIB
    assert lean.qdrant.ram_gib_vendor == pytest.approx(vendor)
    assert lean.qdrant.ram_gib == pytest.approx(vendor * rules.qdrant_replicas)
    fat = plan(work, Measured(qdrant_ram_bytes_per_point=4_000.0, qdrant_ram_fixed_bytes=0.0))
    assert fat.qdrant.ram_gib == pytest.approx(1_000_000 * 4_000 / GIB * 2)
    assert fat.qdrant.nodes >= lean.qdrant.nodes


def test_workers_scale_with_the_write_rate() -> None:
    slow, fast = plan(Workload(100, 100, 1.0)), plan(Workload(100, 100, 100.0))
    assert fast.tasks.vectors_vcpu == math.ceil(100 / 16.0 / 0.6)
    assert fast.tasks.vectors_vcpu > slow.tasks.vectors_vcpu
    cached = plan(Workload(100, 100, 100.0, new_text_share=0.1))
    assert cached.tasks.vectors_vcpu < fast.tasks.vectors_vcpu


def test_a_whale_past_the_promotion_threshold_is_named() -> None:
    assert not plan(Workload(100, 100, 1.0, whale_messages=5_000)).qdrant.whale_promoted
    found = plan(Workload(100, 100, 1.0, whale_messages=300_000))
    assert found.qdrant.whale_promoted
    assert any("promote" in note for note in found.notes)


def test_the_total_is_the_sum_of_its_parts_and_positive_inputs_are_required() -> None:
    found = plan(Workload(10_000, 100, 5.0))
    parts = found.opensearch.usd_month + found.qdrant.usd_month + found.tasks.usd_month
    assert found.usd_month == pytest.approx(parts) and found.usd_month > 0
    with pytest.raises(ValueError, match="positive"):
        plan(Workload(0, 100, 1.0))


def test_predicted_storage_is_linear_in_messages() -> None:
    m = Measured()
    one, ten = predicted_storage(100_000, m), predicted_storage(1_000_000, m)
    assert ten["opensearch_bytes"] - m.opensearch_fixed_bytes == pytest.approx(
        10 * (one["opensearch_bytes"] - m.opensearch_fixed_bytes))
    assert ten["qdrant_ram_bytes"] - m.qdrant_ram_fixed_bytes == pytest.approx(
        10 * (one["qdrant_ram_bytes"] - m.qdrant_ram_fixed_bytes))


def test_the_worked_examples_are_what_sidecar_plan_prints() -> None:
    """docs/operations/capacity.md shows ``sidecar plan`` runs: each must be what the command
    prints today (a changed figure changes the page, or this fails)."""
    from sidecar_tools.cli.bench_cmds import plan_lines

    page = (Path(__file__).parents[2] / "docs/operations/capacity.md").read_text()
    block = page.split("```text\n$ sidecar plan", 1)[1].split("```", 1)[0]
    examples = [e for e in ("$ sidecar plan" + block).split("$ sidecar plan ") if e.strip()]
    assert len(examples) == 3
    for example in examples:
        command, *printed = example.strip().splitlines()
        opts = dict(zip(command.split()[::2], command.split()[1::2], strict=True))
        work = Workload(int(opts["--mailboxes"]), int(opts["--messages-per-mailbox"]),
                        float(opts["--rate"]), searches=float(opts["--searches"]),
                        whale_messages=int(opts["--whale"]))
        assert plan_lines(plan(work)) == printed, command
