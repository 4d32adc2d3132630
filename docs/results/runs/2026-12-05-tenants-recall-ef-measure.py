import sys
from pathlib import Path
from indexer.settings import Settings
from indexer.adapters.qdrant.edge import EdgeStore
from indexer.core.vectors import match
from indexer.adapters.embedding.embedder import build_embedder
from sidecar_tools.bench import queries, tenants_mail as T, tenants_storage as S
from sidecar_tools.bench.dataset import Message
from sidecar_tools.writer.mapping import to_items
pool = T.load_pool(Path("/work/shared/corpora/linux-mips.jsonl.gz"), 10000)
msgs = []
used = [0] * len(pool)
for i in range(100000):
    slot = i % len(pool); copy = used[slot]; used[slot] += 1
    e = T.perturbed(pool[slot], copy)
    items = to_items(e, "w@x"); st = T.state_of(items, "w@x")
    msgs.append(Message(st.ref, str(items.message["thread_key"]), int(items.message["ts"]), None, e))
qs = queries.free_text_queries(msgs, "w@x", int(sys.argv[1]))
qv = build_embedder(Settings()).embed_query(qs)
store = EdgeStore(Path("/work/runs/q1m"))
r = S.recall(store, "c", "t00000@x", qv)
print(len(qs), r)
import qdrant_edge as qe
from indexer.adapters.qdrant.edge_codec import to_filter
shard = store._shard("c"); flt = match("mailbox_id", "t00000@x")
Q = qe.QuantizationSearchParams
def rec(params, depth=200):
    out = []
    for v in qv:
        req = qe.QueryRequest(limit=depth, query=qe.Query.Nearest(list(v)), filter=to_filter(flt), with_payload=False, with_vector=False, params=params)
        a = [str(p.id) for p in shard.query(req)][:10]
        e = [h.id for h in store.search("c", v, flt, 10, exact=True)]
        out.append(len(set(a) & set(e)) / len(e))
    return round(sum(out) / len(out), 4), sum(1 for x in out if x < 1), min(out)
import time
def timed(params, depth=200):
    ts = []
    for _ in range(3):
        for v in qv:
            req = qe.QueryRequest(limit=depth, query=qe.Query.Nearest(list(v)), filter=to_filter(flt), with_payload=True, with_vector=False, params=params)
            t = time.perf_counter(); shard.query(req); ts.append((time.perf_counter() - t) * 1000)
    ts.sort(); return round(ts[len(ts) // 2], 2), round(ts[int(len(ts) * 0.99)], 2)
for ef in (None, 400, 512, 640, 800, 1000):
    p = qe.SearchParams(hnsw_ef=ef, quantization=Q(rescore=True, oversampling=2.0))
    print(ef, rec(p), timed(p), flush=True)
