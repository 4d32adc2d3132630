"""The capacity model behind ``sidecar plan`` (pure: no client, no I/O).

From a workload (mailboxes, messages per mailbox, messages written per second, searches per
second) it sizes OpenSearch (data nodes, primaries, storage, heap), Qdrant (nodes, RAM, disk),
the worker and API tasks (vCPU) and a monthly price, from two kinds of input:

- **the vendors' rules** (:class:`VendorRules`): OpenSearch Service's storage formula
  (source × (1 + replicas) × 1.45), shards of 10–30 GiB (we aim at 25), at most 25 shards per
  GiB of heap and 1,000 per node, heap = half of a node's RAM (capped at 32 GiB); Qdrant's
  RAM rule (vectors × dims × 4 B × 1.5 for float32 in RAM; int8 in RAM with the originals on
  disk keeps about a quarter of that, plus the graph), tenant promotion only past ~20,000
  points (a mailbox under it stays in the fallback shard, which must fit one node);
- **our measured figures** (:class:`Measured`): OpenSearch bytes per message on disk, Qdrant
  RAM (anonymous memory) and disk per point, texts embedded per second per core, CPU
  seconds per search, bulk documents per second per core; the defaults are the figures of
  docs/results/runs/2026-12-04-tenants.md (``sidecar bench-tenants``) and
  docs/results/benchmarks.md.

Every price is a named list price (:class:`Prices`), not a quote: check them before you rely
on the total. docs/operations/capacity.md explains each rule and shows worked examples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

GIB = 1024**3
HOURS_PER_MONTH = 730.0


@dataclass(frozen=True)
class Workload:
    """What a provider runs: ``rate`` messages written per second (sustained, new mail plus
    changes), ``searches`` API requests per second (peak), ``new_text_share`` the share of
    written messages whose text must be embedded (the rest hit the cache or carry no text)."""

    mailboxes: int
    messages_per_mailbox: int
    rate: float
    searches: float = 10.0
    new_text_share: float = 1.0
    whale_messages: int = 0  # the largest mailbox (0: the mean)

    @property
    def messages(self) -> int:
        return self.mailboxes * self.messages_per_mailbox


@dataclass(frozen=True)
class Measured:
    """Our figures: each size a line (fixed + per message or point) through the smallest and
    the largest complete ``bench-tenants`` runs of linux-mips on Edge, int8 layout — 20,000
    messages (2026-12-04) and 200,000 over 10,000 mailboxes (2026-12-05) — validated against
    the runs between them and the 466,000 documents of the stopped 1,000,000-message run; see
    docs/operations/capacity.md and docs/results/runs/. A single per-message figure from a
    small run over-predicted the large ones by a third: bytes per message fall as segments
    grow and merge, and a store's fixed files do not grow with it."""

    opensearch_bytes_per_message: float = 8_314.0  # primaries' store.size, slope
    opensearch_fixed_bytes: float = 65.8e6  # the index's first segments, per store
    # Qdrant: the int8 layout with its per-point keyword indexes on disk (2026-12-05 runs of
    # 20,000 and 100,000 messages). RAM is the anonymous memory a searching owner process
    # holds (int8 vectors, tenant index, id tracker): what a node must keep. The file-backed
    # pages it maps (originals, graphs, payload) are page cache the kernel drops and re-reads
    # as searches move; they live in the headroom left by ``qdrant_ram_headroom``. The VmRSS
    # line before it (1,074 B + 70.5 MB, file pages included) over-predicted 1,000,000
    # messages by 56 %: which pages are resident depends on which mailboxes were searched.
    qdrant_ram_bytes_per_point: float = 642.0  # rss_anon: 17.1 MB at 20k, 68.5 MB at 100k
    qdrant_ram_fixed_bytes: float = 4.3e6  # what the store holds before its first point
    qdrant_disk_bytes_per_point: float = 2_729.0  # int8 + originals + payload + indexes
    qdrant_disk_fixed_bytes: float = 190.6e6  # WAL and segment preallocation
    # all-MiniLM-L6-v2, ONNX int8 (the default), 256 tokens: float32's 8 on busy shared cores
    # x 2.09, int8 over float32 in the same run (results/runs/2026-12-05-encoder-int8-cls.md)
    texts_per_s_per_core: float = 16.0
    bulk_docs_per_s_per_core: float = 80.0  # 163 docs/s on 2 busy shared cores (20k build)
    api_cpu_s_per_search: float = 0.045  # API + OpenSearch (+ Qdrant server) CPU per request
    dims: int = 384


@dataclass(frozen=True)
class VendorRules:
    """The vendors' published sizing rules (OpenSearch Service, Qdrant)."""

    replicas: int = 1
    storage_overhead: float = 1.45  # source x (1 + replicas) x 1.45 (OpenSearch Service)
    target_shard_gib: float = 25.0  # inside the 10-30 GiB advised for search workloads
    shards_per_heap_gib: int = 25
    max_shards_per_node: int = 1_000
    max_heap_gib: float = 32.0
    qdrant_float32_factor: float = 1.5  # RAM = points x dims x 4 B x 1.5
    qdrant_int8_share: float = 0.25  # int8 in RAM, originals on disk: ~4x less
    qdrant_ram_headroom: float = 0.75  # fill a node's RAM to this share at most
    qdrant_replicas: int = 2  # replication factor of a production collection
    tenant_promotion_points: int = 20_000
    vcpu_utilization: float = 0.6  # size CPU for this busy share at the stated rates


@dataclass(frozen=True)
class Node:
    name: str
    vcpu: int
    ram_gib: float
    max_storage_gib: float  # largest EBS volume the service allows per node
    usd_per_hour: float


@dataclass(frozen=True)
class Prices:
    """List prices, us-east-1, on demand, as named (check them: they are not fetched)."""

    opensearch_nodes: tuple[Node, ...] = (
        Node("r6g.large.search", 2, 16, 1_024, 0.167),
        Node("r6g.xlarge.search", 4, 32, 1_536, 0.335),
        Node("r6g.2xlarge.search", 8, 64, 3_072, 0.669),
        Node("r6g.4xlarge.search", 16, 128, 6_144, 1.339),
    )
    opensearch_gp3_usd_per_gib_month: float = 0.122
    qdrant_nodes: tuple[Node, ...] = (
        Node("r6g.large", 2, 16, 16_384, 0.1008),
        Node("r6g.xlarge", 4, 32, 16_384, 0.2016),
        Node("r6g.2xlarge", 8, 64, 16_384, 0.4032),
        Node("r6g.4xlarge", 16, 128, 16_384, 0.8064),
    )
    ebs_gp3_usd_per_gib_month: float = 0.08
    fargate_usd_per_vcpu_hour: float = 0.04048
    fargate_usd_per_gib_hour: float = 0.004445
    fargate_gib_per_vcpu: float = 2.0  # the model and Python: 2 GiB per vCPU


@dataclass(frozen=True)
class OpenSearchPlan:
    index_gib: float  # primaries, from our bytes per message
    storage_gib: float  # with replicas and the vendor overhead
    primaries: int
    shards: int  # primaries x (1 + replicas)
    node: str
    data_nodes: int
    heap_gib: float  # per node
    usd_month: float


@dataclass(frozen=True)
class QdrantPlan:
    points: int
    ram_gib_measured: float  # our anonymous memory per point (one copy)
    ram_gib_vendor: float  # the vendor rule (int8 share of float32 x 1.5; one copy)
    ram_gib: float  # the larger, x replicas
    disk_gib: float  # x replicas
    node: str
    nodes: int
    whale_promoted: bool  # the largest mailbox is past the tenant-promotion threshold
    usd_month: float


@dataclass(frozen=True)
class TaskPlan:
    vectors_vcpu: int
    fulltext_vcpu: int
    api_vcpu: int
    usd_month: float


@dataclass(frozen=True)
class Plan:
    workload: Workload
    opensearch: OpenSearchPlan
    qdrant: QdrantPlan
    tasks: TaskPlan
    usd_month: float
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _smallest(nodes: tuple[Node, ...], fits: Any) -> tuple[Node, int]:
    """The node type and count of the cheapest fleet among ``nodes`` for which
    ``fits(node) -> count`` (the count each type needs)."""
    options = [(node, fits(node)) for node in nodes]
    return min(options, key=lambda o: (o[0].usd_per_hour * o[1], o[1]))


def opensearch_plan(work: Workload, measured: Measured, rules: VendorRules,
                    prices: Prices) -> OpenSearchPlan:
    index_gib = (work.messages * measured.opensearch_bytes_per_message
                 + measured.opensearch_fixed_bytes) / GIB
    storage = index_gib * (1 + rules.replicas) * rules.storage_overhead
    primaries = max(1, math.ceil(index_gib / rules.target_shard_gib))
    shards = primaries * (1 + rules.replicas)
    search_vcpu = work.searches * measured.api_cpu_s_per_search / rules.vcpu_utilization
    bulk_vcpu = work.rate / measured.bulk_docs_per_s_per_core / rules.vcpu_utilization

    def count(node: Node) -> int:
        heap = min(node.ram_gib / 2, rules.max_heap_gib)
        per_node_shards = min(rules.max_shards_per_node, heap * rules.shards_per_heap_gib)
        return max(
            1 + rules.replicas,  # a replica never shares a node with its primary
            math.ceil(storage / node.max_storage_gib),
            math.ceil(shards / per_node_shards),
            math.ceil((search_vcpu + bulk_vcpu) / node.vcpu),
        )

    node, nodes = _smallest(prices.opensearch_nodes, count)
    usd = (nodes * node.usd_per_hour * HOURS_PER_MONTH
           + storage * prices.opensearch_gp3_usd_per_gib_month)
    return OpenSearchPlan(index_gib, storage, primaries, shards, node.name, nodes,
                          min(node.ram_gib / 2, rules.max_heap_gib), usd)


def qdrant_plan(work: Workload, measured: Measured, rules: VendorRules,
                prices: Prices) -> QdrantPlan:
    points = work.messages
    measured_gib = (points * measured.qdrant_ram_bytes_per_point
                    + measured.qdrant_ram_fixed_bytes) / GIB
    vendor_gib = (points * measured.dims * 4 * rules.qdrant_float32_factor
                  * rules.qdrant_int8_share / GIB)
    ram = max(measured_gib, vendor_gib) * rules.qdrant_replicas
    disk = ((points * measured.qdrant_disk_bytes_per_point + measured.qdrant_disk_fixed_bytes)
            / GIB * rules.qdrant_replicas)

    def count(node: Node) -> int:
        usable = node.ram_gib * rules.qdrant_ram_headroom
        return max(rules.qdrant_replicas, math.ceil(ram / usable),
                   math.ceil(disk / node.max_storage_gib))

    node, nodes = _smallest(prices.qdrant_nodes, count)
    usd = (nodes * node.usd_per_hour * HOURS_PER_MONTH
           + disk * prices.ebs_gp3_usd_per_gib_month)
    whale = work.whale_messages or work.messages_per_mailbox
    return QdrantPlan(points, measured_gib, vendor_gib, ram, disk, node.name, nodes,
                      whale > rules.tenant_promotion_points, usd)


def task_plan(work: Workload, measured: Measured, rules: VendorRules,
              prices: Prices) -> TaskPlan:
    vectors = math.ceil(work.rate * work.new_text_share / measured.texts_per_s_per_core
                        / rules.vcpu_utilization)
    fulltext = math.ceil(work.rate / measured.bulk_docs_per_s_per_core / rules.vcpu_utilization)
    api = math.ceil(work.searches * measured.api_cpu_s_per_search / rules.vcpu_utilization)
    vcpu = max(vectors, 1) + max(fulltext, 1) + max(api, 1)
    hourly = vcpu * (prices.fargate_usd_per_vcpu_hour
                     + prices.fargate_gib_per_vcpu * prices.fargate_usd_per_gib_hour)
    return TaskPlan(max(vectors, 1), max(fulltext, 1), max(api, 1), hourly * HOURS_PER_MONTH)


def plan(work: Workload, measured: Measured | None = None, rules: VendorRules | None = None,
         prices: Prices | None = None) -> Plan:
    """Size every part for ``work`` (see the module docstring)."""
    if work.mailboxes < 1 or work.messages_per_mailbox < 1 or work.rate < 0:
        raise ValueError("mailboxes and messages per mailbox must be positive, rate >= 0")
    m, r, p = measured or Measured(), rules or VendorRules(), prices or Prices()
    search = opensearch_plan(work, m, r, p)
    vectors = qdrant_plan(work, m, r, p)
    tasks = task_plan(work, m, r, p)
    notes = []
    if vectors.whale_promoted:
        notes.append(f"the largest mailbox is past {r.tenant_promotion_points:,} points: "
                     "promote it to a shard of its own (Qdrant tiered multitenancy); the "
                     "fallback shard of all other mailboxes must fit one node")
    if search.primaries > 1:
        notes.append(f"{search.primaries} primaries: searches stay on one shard each "
                     "(routing = mailbox_id, routing_partition_size 1)")
    return Plan(work, search, vectors, tasks,
                search.usd_month + vectors.usd_month + tasks.usd_month, notes)


def predicted_storage(messages: int, measured: Measured | None = None) -> dict[str, float]:
    """What the model predicts a single-copy store of ``messages`` holds (the validation row
    compares it with a run): OpenSearch primaries' bytes, Qdrant RAM (anonymous) and disk
    bytes."""
    m = measured or Measured()
    return {"opensearch_bytes": messages * m.opensearch_bytes_per_message
            + m.opensearch_fixed_bytes,
            "qdrant_ram_bytes": messages * m.qdrant_ram_bytes_per_point + m.qdrant_ram_fixed_bytes,
            "qdrant_disk_bytes": messages * m.qdrant_disk_bytes_per_point
            + m.qdrant_disk_fixed_bytes}
