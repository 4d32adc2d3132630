"""``sidecar bench-tenants``: a provider's store — many mailboxes, a whale, a long tail.

Every other search figure comes from one mailbox searched beside copies of itself. This one
builds an index of ``messages`` over ``mailboxes`` with a skew
(:func:`~sidecar_tools.bench.tenants_mail.mailbox_sizes`):

- **the whale**: mailbox 0 holds ``whale_share`` of all messages;
- **mid-size**: the next ``mid_mailboxes`` (default 300, at most a third of the others) share
  ``mid_share`` (default 0.5) of the rest, by a mild Zipf law (weight ``1/rank**0.5``);
- **the long tail**: every other mailbox shares what is left by a Zipf law continued after
  the mid-size ranks (weight ``1/(mids + 1 + rank)``), at least one message each.

Mail is real (a corpus of NormalizedEmail JSON lines): each mailbox takes the next slice of
the corpus's first ``distinct`` valid emails, cycled, so threads stay together. An email used
for the ``k``-th time (``k`` ≥ 1) is a *copy*: other message and thread ids (so other keys),
the mailbox's id, and a cheap perturbation of its text (each word of ``clean`` dropped when a
hash of (word, k) falls in one tenth), so term statistics are not ``k`` identical copies. The
vectors of the ``distinct`` texts are embedded once with the shipped encoder (cached on disk
per corpus selection and model); a copy's vector is the original plus Gaussian noise
(σ = 0.01 per dimension, cosine ≈ 0.98 to it), renormalized, so no two points are equal.

The documents are written with the full-text adapter (``apply``: the pipeline's bulk path) into
an index of ``shards`` primaries, the points with the vector index's ``upsert`` on the chosen
backend (embedded Edge, or a Qdrant server: ``SIDECAR_QDRANT_URL`` or the shared binary), the
searched mailboxes' hot rows (their Message items) into a table of their own, so the API's
join reads real rows. Then, per mailbox class (the whale; the median mid-size
mailbox; the median tail mailbox) and mode, through ``sidecar serve``:

- the fraction of searches whose OpenSearch answers ran on exactly one shard (the API behind
  :class:`~sidecar_tools.bench.shard_probe.ShardProbe`; every query of every class once);
- p50/p95/p99 with one client, then throughput with ``clients`` clients and the CPU seconds
  per request (API process + OpenSearch node + Qdrant server; the moto stand-in for DynamoDB
  is left out; the shared node's CPU includes whatever else ran);
- recall@10 of the vector search the API makes (depth 200, top 10 kept) against an exact
  search of the same mailbox, for the int8 layout and the float32 one built beside it;
- OpenSearch ``store.size`` per message, Qdrant RSS and disk per point for both layouts
  (:func:`~sidecar_tools.bench.tenants_storage.edge_rss` / the server process), and the time
  each build took.

``--json OUT`` writes :func:`run`'s dict; its fields are listed in docs/operations/capacity.md.

This module runs the parts in order and cleans up after them: ``tenants_options`` (the options,
the classes and modes), ``tenants_mail`` (the skew, the pool, the copies and their vectors),
``tenants_build`` (the engines and the hot rows written), ``tenants_storage`` (bytes per
message and per point, recall per layout), ``tenants_measure`` (shards, latency, CPU, the
purge, through the API), ``tenants_process`` (the API and Qdrant servers started, the RSS and
CPU probes) and ``tenants_report`` (the summary and the results page's tables).
"""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from typing import Any

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.embedding.embedder import build_embedder
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import queries
from sidecar_tools.bench.tenants_build import build, write_rows
from sidecar_tools.bench.tenants_mail import base_vectors, load_pool
from sidecar_tools.bench.tenants_measure import (
    measure_latency,
    measure_purge,
    probe_shards,
    workloads,
)
from sidecar_tools.bench.tenants_options import CLASSES, MODES, Log, TenantOptions
from sidecar_tools.bench.tenants_process import qdrant_pid, qdrant_server, settings_for_server
from sidecar_tools.bench.tenants_report import summary
from sidecar_tools.bench.tenants_storage import recall, settle, storage_figures

# what the CLI and the tests import from here
__all__ = ["CLASSES", "MODES", "TenantOptions", "run", "summary"]


def run(opts: TenantOptions, base: Settings, log: Log) -> dict[str, Any]:
    """Build, measure, clean up; the dict ``--json`` writes (fields: capacity.md)."""
    started = time.perf_counter()
    run_id = uuid.uuid4().hex[:8]
    run_dir = opts.workdir / "runs" / f"tenants-{run_id}"
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"bench-{run_id}-tenants"
    settings = base.model_copy(update={
        "table": name, "state_table": f"{name}-state", "opensearch_index": name,
        "qdrant_collection": name, "qdrant_path": run_dir / "qdrant", "queue_prefix": name,
        "opensearch_shards": opts.shards, "qdrant_url": None,
    })
    corpus = opts.corpus if opts.corpus is not None else corpus_mod.default_corpus()
    out: dict[str, Any] = {
        "command": {"messages": opts.messages, "mailboxes": opts.mailboxes,
                    "whale_share": opts.whale_share, "mid_mailboxes": opts.mid_mailboxes,
                    "mid_share": opts.mid_share, "distinct": opts.distinct,
                    "backend": opts.backend, "shards": opts.shards, "clients": opts.clients,
                    "search_seconds": opts.search_seconds, "queries": opts.queries,
                    "corpus": str(corpus) if corpus else "generated"},
    }
    servers: list[Any] = []
    try:
        pool = load_pool(corpus, opts.distinct)
        vectors, out["encode_s"] = base_vectors(settings, pool, opts.workdir / "tenants", log)
        out["distinct_texts"] = len(pool)
        if opts.backend == "server":
            stack = qdrant_server(run_dir, "qdrant-server")
            server = stack.__enter__()
            servers.append(stack)
            settings = settings_for_server(settings, server)
        log(f"tenants: building {opts.messages} messages over {opts.mailboxes} mailboxes "
            f"({opts.backend}, {opts.shards} shards)")
        built = build(settings, opts, pool, vectors, run_id, log)
        out["mailboxes_searched"] = built.mailboxes
        out["mailbox_sizes"] = built.sizes
        out["documents"], out["points"] = built.documents, built.points
        out["rows_s"] = write_rows(settings, built.rows)
        out["hot_rows_messages"] = len(built.rows)
        index = factories.vector_index(settings)
        store, collection = index.store, index.store.aliases()[index.alias]
        out["vectors_settle_s"] = settle(store, collection)
        out["build"] = {"fulltext_s": built.fulltext_s, "vectors_upsert_s": built.vectors_s,
                        "vectors_settle_s": out["vectors_settle_s"],
                        "total_s": built.fulltext_s + built.vectors_s + out["vectors_settle_s"]}
        embedder = build_embedder(settings)
        work = workloads(built, opts.queries)
        qvec = {cls: embedder.embed_query(queries.free_text_queries(
            built.messages[cls], w.mailbox, opts.recall_queries)) for cls, w in work.items()}
        out["recall"] = {"int8": {cls: recall(store, collection, w.mailbox, qvec[cls])
                                  for cls, w in work.items()}}
        out.update(storage_figures(settings, opts, run_dir, index, collection, work, qvec,
                                   servers, log))
        factories.vector_index.cache_clear()
        out["shards"] = probe_shards(settings, work, run_dir, log)
        server_pid = qdrant_pid(settings) if opts.backend == "server" else None
        if opts.search_seconds > 0:  # 0: structure only (the CI test)
            out["latency"] = measure_latency(settings, work, opts, run_dir, server_pid, log)
        if opts.purge and opts.backend == "server":
            out["purge"] = measure_purge(settings, work, opts, run_dir, log)
    finally:
        factories.vector_index.cache_clear()
        for stack in reversed(servers):
            stack.__exit__(None, None, None)
        build_opensearch(base).indices.delete(index=f"{name}*", ignore_unavailable=True,
                                              expand_wildcards="all")
        for table in (name, f"{name}-state"):
            with contextlib.suppress(Exception):  # a table never made: nothing to delete
                aws.client(base, "dynamodb").delete_table(TableName=table)
        shutil.rmtree(run_dir, ignore_errors=True)
    out["wall_s"] = time.perf_counter() - started
    return out
