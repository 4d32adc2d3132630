"""``sidecar bench-cluster``: the single-node stack and the cluster stack side by side, in one
run on one machine (issue 26 part 5).

- **single**: the local stack's OpenSearch node and one Qdrant server of the shared binary.
  A server, not the embedded store, because the embedded store admits one process (no 2 or
  4 vectors workers) and the cluster is servers too: the comparison is 1 node vs 3 nodes.
- **cluster**: :class:`~sidecar_tools.stack.cluster.ClusterStack` on ports of its own, the
  index with 3 shards x 1 replica, collections with 3 shards x 2 replicas (``env()``).

Phases, every one on both stacks: N messages through the real pipeline into the single stack
(their documents and vectors are the source of every copy); the writes — those documents and
points copied ``copies`` times (the cluster also gets the originals), timed per backend; the
API's four modes with 1 and 8 clients; indexing throughput of a smaller subset through real
Celery workers with 1, 2 and 4 processes per role (embedding N on 2 cores would take hours).
Both stacks stay up for the whole run, so each phase of one runs beside the other idle.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import dataset, limits, pipeline, queries, search
from sidecar_tools.bench.cluster_writes import (
    indexing_run,
    read_documents,
    read_points,
    write_documents,
    write_points,
)
from sidecar_tools.bench.dataset import Dataset
from sidecar_tools.stack import components, opensearch_node
from sidecar_tools.stack.cluster import ClusterStack, free_base
from sidecar_tools.stack.qdrant_server import server_binary, start_server
from sidecar_tools.stack.settings import get_stack_settings

Log = Callable[[str], None]
STACKS = ("single", "cluster")
# Away from the single-node stack, test_cluster_stack.py (29200), test_node_loss.py (30200,
# 31200, 27200, 26200) and below the ephemeral range (32768+), where source ports of
# connections come and go.
CLUSTER_BASES = (24200, 25200, 28200, 22200)


@dataclass(frozen=True)
class ClusterBenchOptions:
    corpus: Path | None
    messages: int = 5000
    copies: int = 19
    search_seconds: float = 8.0
    clients: tuple[int, ...] = (1, 8)
    index_messages: int = 500
    processes: tuple[int, ...] = (1, 2, 4)
    workdir: Path = Path(".sidecar/bench")
    heap: str = "1g"  # per OpenSearch node of the cluster


@contextmanager
def stacks(base: Settings, run_dir: Path, heap: str, log: Log) -> Iterator[dict[str, Settings]]:
    """Both stacks' engine settings, up for the block and shut down after it: one Qdrant
    server beside the local stack's OpenSearch, and a cluster stack of the run's own."""
    binary = server_binary()
    if binary is None:
        raise RuntimeError("bench-cluster needs the Qdrant server binary (SIDECAR_QDRANT_BIN "
                           "or ../shared/tools/qdrant)")
    with ExitStack() as stack:
        server = start_server(binary, run_dir / "qdrant-single")
        stack.callback(server.stop)
        classpath = opensearch_node.prepare(components.opensearch_cache_dir(get_stack_settings()))
        cluster = ClusterStack(run_dir / "cluster", classpath, base=free_base(CLUSTER_BASES),
                               heap=heap)
        stack.callback(cluster.down)
        log(f"bench-cluster: starting 3 OpenSearch + 3 Qdrant nodes (base {cluster.base})")
        cluster.up(300)
        env = cluster.env()
        yield {
            "single": base.model_copy(update={"qdrant_url": server.url,
                                              "qdrant_grpc_port": server.grpc_port}),
            "cluster": base.model_copy(update={
                "opensearch_url": env["SIDECAR_OPENSEARCH_URL"], "opensearch_shards": 3,
                "opensearch_replicas": 1, "qdrant_url": env["SIDECAR_QDRANT_URL"],
                "qdrant_grpc_port": cluster.qd_port(0) + 1, "qdrant_shard_number": 3,
                "qdrant_replication_factor": 2, "qdrant_write_consistency_factor": 1}),
        }


def _load(opts: ClusterBenchOptions, base: Settings, messages: int) -> Dataset:
    path = opts.corpus if opts.corpus is not None else corpus_mod.default_corpus()
    chosen = corpus_mod.select(path, messages, opts.workdir / "corpus")
    return dataset.prepare(base, chosen, opts.workdir / "corpus" / chosen.key)


def run(opts: ClusterBenchOptions, base: Settings, log: Log) -> dict[str, Any]:
    """Every phase on both stacks; the figures as plain JSON-able values."""
    data = _load(opts, base, opts.messages)
    subset = _load(opts, base, min(opts.index_messages, opts.messages))
    run_id = uuid.uuid4().hex[:8]
    run_dir = (opts.workdir / "runs" / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"messages": len(data.messages), "copies": opts.copies,
                           "index_messages": len(subset.messages), "run": run_id}
    made: list[Settings] = []
    try:
        with stacks(base, run_dir, opts.heap, log) as engines:
            def ns(stack: str, tag: str, over: Dataset) -> Settings:
                settings = pipeline.namespace(engines[stack], over.table, run_id,
                                              f"{stack}-{tag}", run_dir)
                made.append(settings)
                return settings
            try:
                _run_phases(opts, data, subset, ns, run_dir, out, log)
            finally:
                for settings in made:  # the single node outlives the run: leave nothing there
                    limits.drop_index(build_opensearch(settings), settings.opensearch_index)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return out


def _run_phases(opts: ClusterBenchOptions, data: Dataset, subset: Dataset,
                ns: Callable[[str, str, Dataset], Settings], run_dir: Path,
                out: dict[str, Any], log: Log) -> None:
    search_ns = {s: ns(s, "search", data) for s in STACKS}
    loads = out.setdefault("load_average", {"start": load_average()})
    out["pipeline"] = _index_source(search_ns["single"], data, run_dir, log)
    loads["pipeline"] = load_average()
    out["writes"] = _writes(search_ns, opts.copies, log)
    loads["writes"] = load_average()
    out["search"] = {s: _search(search_ns[s], data, opts, run_dir, log) for s in STACKS}
    loads["search"] = load_average()
    out["indexing"] = {s: [] for s in STACKS}
    for n in opts.processes:  # interleaved: load drift touches both stacks alike
        for s in STACKS:
            log(f"bench-cluster: indexing {len(subset.messages)} messages on {s}, "
                f"{n} worker process(es) per role")
            out["indexing"][s].append(indexing_run(ns(s, f"w{n}", subset), subset, n,
                                                   run_dir / f"w{n}-{s}.log"))
    loads["indexing"] = load_average()


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages now (other sessions share the cores)."""
    return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])


def _index_source(settings: Settings, data: Dataset, run_dir: Path, log: Log) -> dict[str, Any]:
    """N messages through the pipeline into the single stack: the source of every copy."""
    log(f"bench-cluster: indexing {len(data.messages)} messages into the single stack "
        "(1 worker process per role)")
    return indexing_run(settings, data, 1, run_dir / "source.log")


def _writes(ns: dict[str, Settings], copies: int, log: Log) -> dict[str, Any]:
    """The same documents and points into both stacks: the single stack already holds the
    originals (copies 1..C), the cluster gets them too (0..C), so both end with N x (C+1)."""
    docs, points = read_documents(ns["single"]), read_points(ns["single"])
    out: dict[str, Any] = {"source_documents": len(docs), "source_points": len(points)}
    for stack, numbers in (("single", range(1, copies + 1)), ("cluster", range(copies + 1))):
        log(f"bench-cluster: {len(docs) * len(numbers)} documents into {stack} OpenSearch")
        out[f"{stack}_documents"] = write_documents(docs, ns[stack], numbers).as_json()
        log(f"bench-cluster: {len(points) * len(numbers)} points into {stack} Qdrant")
        out[f"{stack}_points"] = write_points(points, ns[stack], numbers).as_json()
        client = build_opensearch(ns[stack])
        out[f"{stack}_indexed"] = int(client.count(index=ns[stack].opensearch_index)["count"])
        out[f"{stack}_layout"] = layout(ns[stack])
    return out


def layout(settings: Settings) -> dict[str, Any]:
    """How the stack really laid out the run's index and vectors collection (as created from
    the settings): OpenSearch shards and replicas, Qdrant shards and replication factor."""
    client = build_opensearch(settings)
    found = client.indices.get_settings(index=settings.opensearch_index)
    index = next(iter(found.values()))["settings"]["index"]
    url = str(settings.qdrant_url)
    aliases = _json(f"{url}/aliases")["result"]["aliases"]
    names = {a["collection_name"] for a in aliases
             if a["alias_name"].startswith(settings.qdrant_collection)}
    params = [_json(f"{url}/collections/{n}")["result"]["config"]["params"] for n in sorted(names)]
    return {"opensearch_shards": int(index["number_of_shards"]),
            "opensearch_replicas": int(index["number_of_replicas"]),
            "qdrant": [{"shards": p.get("shard_number", 1),
                        "replicas": p.get("replication_factor", 1)} for p in params]}


def _json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 (loopback)
        return json.loads(answer.read())


def _search(settings: Settings, data: Dataset, opts: ClusterBenchOptions, run_dir: Path,
            log: Log) -> dict[str, Any]:
    """The API's four modes on one stack, per client count; the API's peak RSS."""
    mailbox = data.messages[0].ref.mailbox_id
    work = search.Workload(mailbox, queries.fulltext_queries(data.messages, mailbox),
                           queries.free_text_queries(data.messages, mailbox),
                           queries.similar_keys(data.messages, mailbox))
    api = search.start_api(settings, mailbox, 0, run_dir / f"api-{settings.queue_prefix}.log")
    out: dict[str, Any] = {}
    try:
        for clients in opts.clients:
            log(f"bench-cluster: API on {settings.opensearch_url}, {clients} client(s) x "
                f"{opts.search_seconds:.0f}s per mode")
            measured = search.measure_api(api, work, clients=clients, seconds=opts.search_seconds)
            out[str(clients)] = {mode: lat.as_json() for mode, lat in measured.items()}
    finally:
        out["api_rss_mib"] = search.stop_api(api)
    return out
