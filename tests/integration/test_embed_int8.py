"""Issue 42 parts 1 and 3: the int8 encoder's retrieval gates on real mail, and queries that
never wait behind documents.

- Gates (the figures of docs/encoder.md at CI size): the int8 graph, made from the shipped
  weights at export and cached beside the float32 graph (``onnx_graph("#int8")``: made once
  per machine and recipe, so CI does not quantize again in every test), against the float32
  encoder on ``N_TEXTS`` real linux-mips ``forai`` texts (tests/data/corpora): same-thread
  recall@10 within 0.01, mean top-10 overlap >= 0.90, per-text cosine >= 0.95 (minimum) and
  >= 0.97 (1st percentile).
- The query path encodes on a session of its own while a document batch is being encoded
  (the document session blocked mid-batch: the query still returns), and a document batch
  does not start while a query is being encoded.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexer.adapters.embedding.embedder import DOCUMENT_NICE, Embedder, onnx_graph
from sidecar_tools.bench.encoders import (
    MAX_RECALL_DROP,
    MIN_COSINE,
    MIN_OVERLAP,
    MIN_P1_COSINE,
    same_thread_recall,
    top_overlap,
)
from tests.conftest import CORPORA

# 240 texts: ~20 s of encoding on a quiet 2-core machine (both precisions), 2-4x under load
N_TEXTS = int(os.environ.get("SIDECAR_TEST_INT8_TEXTS", "240"))


def _forai(n: int) -> tuple[list[str], list[str]]:
    """The first ``n`` distinct non-empty ``forai`` texts of the 4k corpus, with threads."""
    seen: dict[str, str] = {}
    with gzip.open(CORPORA / "linux-mips-4k.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            text = str((entry.get("content") or {}).get("forAI") or "")
            if text.strip() and text not in seen:
                seen[text] = str(entry.get("threadId"))
            if len(seen) == n:
                break
    return list(seen), list(seen.values())


def test_the_int8_graph_is_cached_beside_the_float32_one() -> None:
    import onnx

    int8, fp32 = onnx_graph("#int8"), onnx_graph("")
    assert int8.is_file() and int8.parent == fp32.parent
    assert int8.name.startswith(fp32.stem + "-int8-")
    ops = Counter(node.op_type for node in onnx.load(str(int8)).graph.node)
    # every layer's Q/K/V projections and its three other MatMuls in int8 (MatMulInteger)...
    assert (ops["QAttention"], ops["MatMulInteger"]) == (6, 18), ops
    # ...but the [CLS] position's feed-forward block: float32 MatMuls on their own slice
    assert (ops["MatMul"], ops["Slice"], ops["Concat"]) == (12, 12, 6), ops
    # and no SkipLayerNormalization (slower than Add + LayerNormalization on the CPU)
    assert ops["SkipLayerNormalization"] == 0 and ops["LayerNormalization"] == 12, ops


@pytest.mark.slow
def test_int8_passes_the_retrieval_gates_on_real_mail() -> None:
    texts, threads = _forai(N_TEXTS)
    kw: dict[str, Any] = {"max_tokens": 256, "threads": 2, "batch_size": 32}
    fp32 = np.asarray(Embedder(**kw).embed(texts))
    int8_embedder = Embedder(model="#int8", **kw)
    assert int8_embedder.dtype == "int8"
    int8 = np.asarray(int8_embedder.embed(texts))
    cosine = (fp32 * int8).sum(axis=1)
    overlap = top_overlap(int8, fp32)
    recall, base = same_thread_recall(int8, threads), same_thread_recall(fp32, threads)
    figures = (f"min cos {cosine.min():.4f}, p1 {np.percentile(cosine, 1):.4f}, recall "
               f"{recall:.3f} vs {base:.3f}, overlap {overlap.mean():.3f}")
    assert recall >= base - MAX_RECALL_DROP, figures
    assert overlap.mean() >= MIN_OVERLAP, figures
    assert cosine.min() >= MIN_COSINE, figures
    assert np.percentile(cosine, 1) >= MIN_P1_COSINE, figures


class _Gate:
    """Wraps a session's ``run``: signals when a run starts, holds it until released."""

    def __init__(self, session: Any) -> None:
        self.inner, self.started, self.release = session, threading.Event(), threading.Event()
        self.calls = 0

    def run(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.started.set()
        assert self.release.wait(30), "never released"
        return self.inner.run(*args, **kwargs)

    def get_inputs(self) -> Any:
        return self.inner.get_inputs()


def test_queries_encode_on_their_own_session_while_documents_encode() -> None:
    embedder = Embedder(max_tokens=128, threads=2, batch_size=8)
    docs, query = embedder.document_encoder(), embedder.query_encoder()
    assert docs is not query and docs._session is not query._session
    gate = _Gate(docs._session)
    docs._session = gate
    with ThreadPoolExecutor(2) as pool:
        batch = pool.submit(embedder.embed, ["a patch to the r4k cache flush"] * 8)
        assert gate.started.wait(30)  # the document batch is in the middle of its session run
        vector = pool.submit(embedder.embed_query, ["cache flush"]).result(timeout=30)
        assert len(vector[0]) == embedder.dimension and not batch.done()
        gate.release.set()
        assert len(batch.result(timeout=60)) == 8
    docs._session = gate.inner


def test_a_document_batch_waits_for_the_query_being_encoded() -> None:
    embedder = Embedder(max_tokens=128, threads=2, batch_size=8)
    query = embedder.query_encoder()
    gate = _Gate(query._session)
    query._session = gate
    docs_started = threading.Event()
    inner_encode = embedder.document_encoder().encode

    def encode(*args: Any) -> Any:
        docs_started.set()
        return inner_encode(*args)

    embedder.document_encoder().encode = encode
    with ThreadPoolExecutor(2) as pool:
        asked = pool.submit(embedder.embed_query, ["cache flush"])
        assert gate.started.wait(30)
        batch = pool.submit(embedder.embed, ["a patch to the r4k cache flush"] * 8)
        assert not docs_started.wait(0.5)  # held back while the query encodes
        gate.release.set()
        asked.result(timeout=30)
        assert len(batch.result(timeout=60)) == 8 and docs_started.is_set()
    query._session = gate.inner


def _nice(tid: int) -> int:
    """A thread's nice value, from /proc (field 19 of its stat line)."""
    stat = (Path("/proc/self/task") / str(tid) / "stat").read_text(encoding="utf-8")
    return int(stat.rsplit(")", 1)[1].split()[16])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_documents_encode_below_the_queries_priority() -> None:
    """A query preempts a document batch already running: the documents' thread and the ONNX
    Runtime threads of its session run at nice >= 10, the query path at the caller's."""
    own = _nice(threading.get_native_id())
    embedder = Embedder(max_tokens=128, threads=2, batch_size=8)
    text = "a patch to the r4k cache flush"
    assert embedder.embed([text]) and embedder.embed_query([text])
    assert embedder._documents is not None
    documents = embedder._documents.submit(threading.get_native_id).result()
    assert _nice(documents) >= max(own, DOCUMENT_NICE)
    # its session's own thread (2 intra-op threads: the caller and one of ONNX Runtime's)
    niced = [t for t in os.listdir("/proc/self/task") if _nice(int(t)) >= DOCUMENT_NICE]
    assert len(niced) >= 2, niced
    assert _nice(threading.get_native_id()) == own  # the caller (the API's threads) keeps its
    # the queries' own tokenization gives the vectors the documents' pooled one gives
    assert np.allclose(embedder.embed_query([text]), embedder.embed([text]), atol=1e-6)
