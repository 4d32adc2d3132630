"""Scratch: the 1M Edge int8 store alone (no OpenSearch), to find where whale recall goes."""
import json, sys, time, random
from pathlib import Path
import numpy as np
import qdrant_edge as qe
from indexer.settings import Settings
from indexer.adapters.qdrant.edge import EdgeStore
from indexer.core.vectors import PointWrite, match
from indexer.adapters.embedding.embedder import build_embedder
from sidecar_tools.bench import tenants_mail as T

N = int(sys.argv[1]); root = Path(sys.argv[2]); mode = sys.argv[3]
settings = Settings()
pool = T.load_pool(Path("/work/shared/corpora/linux-mips.jsonl.gz"), 10000)
vectors, _ = T.base_vectors(settings, pool, Path("/work/main/.sidecar/bench/tenants"), print)
sizes = T.mailbox_sizes(N, 10000, 0.1, 300, 0.5)
chosen = T.searched(sizes, 300)
whale_i = chosen["whale"]
box = [f"t{n:05d}@x" for n in range(len(sizes))]
store = EdgeStore(root)
coll = "c"
if mode == "build":
    store.create(coll, 384, ("thread_key", "message_key"))
    used = [0] * len(pool); cursor = 0; batch = []; t0 = time.time(); pid = 0
    for n, size in enumerate(sizes):
        for _ in range(size):
            slot = cursor % len(pool); cursor += 1; copy = used[slot]; used[slot] += 1
            base = vectors[slot]
            if base is None: continue
            v = [float(x) for x in base] if copy == 0 else T.noisy(base, f"{copy}|{box[n]}|{slot}")
            pid += 1
            batch.append(PointWrite(f"00000000-0000-0000-0000-{pid:012d}", v,
                         {"mailbox_id": box[n], "thread_key": f"th{slot}", "message_key": f"m{pid}", "ts": pid}))
            if len(batch) >= 1000:
                store.upsert(coll, batch); store.flush(); batch = []
        if n % 1000 == 0: print(n, pid, round(time.time() - t0), flush=True)
    if batch: store.upsert(coll, batch)
    t1 = time.time(); store.settle(coll); print("settle", round(time.time() - t1), "build", round(time.time() - t0), flush=True)
else:
    emb = build_embedder(settings)
    rnd = random.Random(7)
    subjects = [str(e["metadata"].get("subject") or "") for e in rnd.sample(pool, int(sys.argv[4]) * 2)]
    subjects = [s for s in subjects if s][:int(sys.argv[4])]
    qv = emb.embed_query(subjects)
    shard = store._shard(coll)
    info = shard.info()
    print("info", info.segments_count, info.points_count, info.indexed_vectors_count, flush=True)
    flt = match("mailbox_id", box[whale_i])
    def run(params, depth=200):
        from indexer.adapters.qdrant.edge_codec import to_filter
        rec = []
        for v in qv:
            req = qe.QueryRequest(limit=depth, query=qe.Query.Nearest(list(v)), filter=to_filter(flt), with_payload=False, with_vector=False, params=params)
            a = [str(p.id) for p in shard.query(req)][:10]
            e = [h.id for h in store.search(coll, v, flt, 10, exact=True)]
            rec.append(len(set(a) & set(e)) / len(e))
        return round(sum(rec) / len(rec), 4), sum(1 for r in rec if r < 1), min(rec)
    Q = qe.QuantizationSearchParams
    variants = [("default", qe.SearchParams(quantization=Q(rescore=True, oversampling=2.0))),
                    ("ef512", qe.SearchParams(hnsw_ef=512, quantization=Q(rescore=True, oversampling=2.0))),
                    ("ef1024", qe.SearchParams(hnsw_ef=1024, quantization=Q(rescore=True, oversampling=2.0))),
                    ("acorn", qe.SearchParams(acorn=qe.AcornSearchParams(enable=True), quantization=Q(rescore=True, oversampling=2.0))),
                    ("os4", qe.SearchParams(quantization=Q(rescore=True, oversampling=4.0))),
                    ("noquant", qe.SearchParams(quantization=Q(ignore=True))),
                    ("indexed_only", qe.SearchParams(indexed_only=True, quantization=Q(rescore=True, oversampling=2.0)))]
    for name, p in [v for v in variants if v[0] in sys.argv[5].split(",")]:
        try:
            print(name, run(p), flush=True)
        except Exception as exc:
            print(name, "error", exc)
