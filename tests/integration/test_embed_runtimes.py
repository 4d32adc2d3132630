"""Issue 24 parts 1-2: the torch-free encoder and the slim roles.

- ONNX Runtime on the exported graph gives the vectors of sentence-transformers on torch
  (float32, the reference every precision gate uses): cosine >= 0.9999 for every one of
  ``N_TEXTS`` real linux-mips ``forai`` texts, and the same-thread recall@10 within 0.005, so
  a collection written by either runtime stays valid for the other (its name does not say).
- The roles that never embed (tailer, full-text worker, ingest/backfill, reconcile/purge, the
  Lambda handler) import neither torch nor ONNX Runtime.
- A role that embeds, started without its runtime's extra, exits 2 with one line naming it.
- The tests that run a model (moved from the unit tier, which stays fast): bfloat16 within the
  quality gate of float32, and a model read from its own files (``SIDECAR_EMBED_MODEL``:
  dimension, max sequence length, prompts, slug) built, loaded offline and run.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from indexer.adapters.embedding import embedder as embedder_mod
from indexer.adapters.embedding.embedder import (
    MODEL_SLUG,
    Embedder,
    encoder_problem,
    model_catalog,
    model_info,
)
from tests.conftest import CORPORA
from tests.support.model_helpers import TINY_DIM, TINY_MAX_SEQ, build_tiny_model

ROOT = Path(__file__).resolve().parents[2]
# 1,000 texts, as the issue asks: 59 s for the test on a quiet machine's 2 cores (ONNX 27 s,
# torch 30 s), 3-4x that under other sessions' load; SIDECAR_TEST_RUNTIME_TEXTS=N runs fewer.
N_TEXTS = int(os.environ.get("SIDECAR_TEST_RUNTIME_TEXTS", "1000"))
ENCODER_MODULES = ("torch", "onnxruntime", "sentence_transformers", "transformers", "tokenizers")


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


def _recall(vectors: np.ndarray, threads: list[str], k: int = 10) -> float:
    from sidecar_tools.bench.encoders import same_thread_recall

    return same_thread_recall(vectors, threads, k)


@pytest.mark.slow
def test_onnx_vectors_equal_torch_vectors() -> None:
    texts, threads = _forai(N_TEXTS)
    assert len(texts) == N_TEXTS
    started = time.perf_counter()
    onnx = np.asarray(Embedder(max_tokens=256, threads=2, batch_size=32, runtime="onnx",
                               dtype="float32").embed(texts))
    onnx_s = time.perf_counter() - started
    torch = np.asarray(Embedder(max_tokens=256, threads=2, batch_size=32, runtime="torch",
                                dtype="float32").embed(texts))
    print(f"{N_TEXTS} texts: onnx {onnx_s:.1f} s, torch {time.perf_counter() - started - onnx_s:.1f} s")
    assert onnx.shape == torch.shape == (N_TEXTS, 384)
    cosine = (onnx * torch).sum(axis=1)
    print(f"cosine min {cosine.min():.6f}, p1 {np.percentile(cosine, 1):.6f}")
    assert cosine.min() >= 0.9999, (cosine.min(), texts[int(cosine.argmin())][:200])
    assert abs(_recall(onnx, threads) - _recall(torch, threads)) <= 0.005


def test_a_second_model_embeds_alike_on_both_runtimes(tmp_path: Path) -> None:
    """A model of other shape (48 dimensions, word-level vocabulary, e5 prompts): the graph is
    exported on first use (torch is installed here), prompts and truncation as torch's."""
    texts = ["the cache flush on the R10000", "conference hotel booking", "patch " * 100]
    model = str(build_tiny_model(tmp_path, texts * 3))
    onnx_dir = tmp_path / "onnx"
    kw = {"max_tokens": 256, "threads": 1, "batch_size": 2, "dtype": "float32", "model": model}
    onnx = Embedder(runtime="onnx", onnx_dir=onnx_dir, **kw)  # type: ignore[arg-type]
    torch = Embedder(runtime="torch", **kw)  # type: ignore[arg-type]
    assert [p.suffix for p in onnx_dir.iterdir()] == [".onnx"]
    assert onnx.dimension == torch.dimension == 48
    for a, b in ((onnx.embed(texts), torch.embed(texts)),
                 (onnx.embed_query(texts), torch.embed_query(texts))):
        assert ((np.asarray(a) * np.asarray(b)).sum(axis=1) >= 0.9999).all()


def _mips_forai(n: int) -> list[str]:
    with gzip.open(CORPORA / "linux-mips-4k.jsonl.gz", "rt", encoding="utf-8") as lines:
        found = (str((json.loads(line).get("content") or {}).get("forAI") or "") for line in lines)
        return list(islice((t for t in found if t.strip()), n))


@pytest.mark.slow
def test_bfloat16_vectors_match_float32() -> None:
    """The gate of docs/results/runs/2026-11-30-encoders.md (cosine >= 0.99 per text) on 48 real forai texts
    (bfloat16 is the torch runtime's)."""
    texts = _mips_forai(48)
    reference = np.asarray(
        Embedder(max_tokens=256, threads=2, batch_size=16, dtype="float32",
                 runtime="torch").embed(texts))
    half = np.asarray(
        Embedder(max_tokens=256, threads=2, batch_size=16, dtype="bfloat16",
                 runtime="torch").embed(texts))
    assert half.shape == reference.shape == (48, 384)
    assert np.allclose(np.linalg.norm(half, axis=1), 1.0, atol=1e-5)
    cosine = (half * reference).sum(axis=1)
    assert cosine.min() >= 0.99, cosine.min()
    assert not np.array_equal(half, reference), "both ran in the same precision"


TINY_TEXTS = ["the cache flush on the R10000", "conference hotel booking", "a patch for cifs"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("models"), TINY_TEXTS * 3)


def test_a_local_model_is_described_by_its_files(tiny_model: Path) -> None:
    info = model_info(str(tiny_model))
    assert info.slug == "tiny-bert-e5"
    assert (info.dimension, info.max_seq_length) == (TINY_DIM, TINY_MAX_SEQ)
    assert (info.query_prompt, info.document_prompt) == ("query: ", "passage: ")
    assert list(model_catalog("", [str(tiny_model)])) == [MODEL_SLUG, "tiny-bert-e5"]


@pytest.mark.parametrize("runtime", ["torch", "onnx"])
def test_the_model_embeds_with_its_prompts_and_dimension(tiny_model: Path, runtime: str) -> None:
    embedder = Embedder(max_tokens=256, threads=1, batch_size=4, dtype="float32",
                        model=str(tiny_model), runtime=runtime)
    assert embedder.dimension == TINY_DIM
    assert embedder.max_tokens == TINY_MAX_SEQ  # capped by the model's own limit
    docs, queries = np.asarray(embedder.embed(TINY_TEXTS)), np.asarray(embedder.embed_query(TINY_TEXTS))
    assert docs.shape == queries.shape == (3, TINY_DIM)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(docs, queries)  # "passage: " vs "query: " prefixes
    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(str(tiny_model), device="cpu", local_files_only=True)
    want = plain.encode(["query: " + TINY_TEXTS[0]], normalize_embeddings=True)[0]
    assert np.allclose(queries[0], want, atol=1e-5)


def test_the_roles_that_never_embed_import_no_encoder() -> None:
    """Subprocess: what the tailer, the full-text worker (the Celery tasks module), the CLI
    (tail, ingest, backfill, reconcile, purge), the ops and the Lambda handler import."""
    modules = ["indexer.sources.tail.loop", "indexer.sources.lambda_handler",
               "indexer.sources.backfill", "indexer.pipeline.tasks", "indexer.pipeline.dispatch",
               "indexer.pipeline.workers",
               "indexer.ops.reconcile", "indexer.ops.purge", "indexer.cli.main"]
    probe = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ENCODER_MODULES!r}))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Make ``find_spec`` report the named modules as not installed."""
    real = embedder_mod.importlib.util.find_spec

    def hide(*names: str) -> None:
        monkeypatch.setattr(embedder_mod.importlib.util, "find_spec",
                            lambda name, *a: None if name in names else real(name, *a))
    return hide


def test_a_missing_runtime_names_its_extra(without) -> None:  # type: ignore[no-untyped-def]
    assert encoder_problem("onnx", "", None) is None  # the dev environment has everything
    without("onnxruntime")
    problem = encoder_problem("onnx", "", None)
    assert problem and "'mail-search-sidecar[vectors]'" in problem and "onnxruntime" in problem
    without("torch", "sentence_transformers")
    problem = encoder_problem("torch", "", None)
    assert problem and "'mail-search-sidecar[torch]'" in problem


@pytest.mark.parametrize("args", [["serve"], ["worker", "--role", "vectors"]])
def test_an_embedding_role_without_its_extra_exits_2(
    args: list[str], without, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    from indexer.cli import main, pipeline_cmds

    monkeypatch.setattr(pipeline_cmds, "require_tables", lambda settings: None)
    without("onnxruntime")
    result = CliRunner().invoke(main.app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "[vectors]" in lines[0], result.stderr
