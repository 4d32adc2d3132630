"""The encoder without torch: ONNX Runtime on a graph exported from the model's own weights.

Why: torch, its CUDA wheels and sentence-transformers are ~3.4 GB of a ~5 GB image, for a
six-layer MiniLM that ONNX Runtime runs with the same vectors (cosine 1.0000,
docs/results/runs/2026-12-02-onnx-encoder.md) in a few tens of MB. What
sentence-transformers does around the transformer is redone here from the model's own files,
so a collection's vectors do not depend on the
runtime: the same tokenizer (``tokenizer.json``, by the ``tokenizers`` library that
``transformers`` itself wraps), the same truncation (``min(SIDECAR_EMBED_MAX_TOKENS, the model's
max_seq_length)`` tokens, specials included), the prompt prepended as sentence-transformers
does, and the pooling of ``modules.json``'s Pooling module over the attention mask. Modules this
file cannot redo exactly (Dense layers, prompt-excluding pooling, ...) are refused with
:class:`OnnxUnsupported`: such a model runs on ``SIDECAR_EMBED_RUNTIME=torch``.

The graph is never fetched: it is ``<SIDECAR_EMBED_ONNX_DIR>/<slug>-<fingerprint>.onnx``, made by
``sidecar export-onnx`` (:mod:`indexer.adapters.embedding.onnx_export`, which needs the ``[torch]``
extra:
the dev environment and the image's build stage). The fingerprint hashes the weights and
config it was exported from, so a graph can never serve another model's (or another version's)
weights under the same slug; a directory shared by several checkouts is therefore safe.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedding.model_files import ModelInfo
from indexer.adapters.embedding.onnx_quantize import DISABLED_OPTIMIZERS

EXPORT_FORMAT = "1"  # part of the fingerprint: bump when the exported graph's contract changes
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
POOLING_MODES = ("mean", "mean_sqrt_len_tokens", "cls", "max")
_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")


class OnnxUnsupported(ValueError):
    """The model holds a module the ONNX encoder cannot redo exactly: use the torch runtime."""


class GraphMissing(FileNotFoundError):
    """No exported graph for this model's weights in the ONNX directory."""


@dataclass(frozen=True)
class OnnxLayout:
    """What sentence-transformers does around the transformer, read from ``modules.json``."""

    transformer: Path  # the directory of config.json, the weights and tokenizer.json
    pooling: tuple[str, ...]


def _read_json(path: Path) -> Any:
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _pooling_modes(config: dict[str, Any]) -> tuple[str, ...]:
    """sentence-transformers 6's ``pooling_mode`` (a name or a list), else the legacy
    ``pooling_mode_*`` booleans of older saves (MiniLM's), in sentence-transformers' order."""
    mode = config.get("pooling_mode")
    if mode is None:
        found = tuple(name for key, name in _LEGACY_POOLING.items() if config.get(key))
        return found or ("mean",)
    return (mode,) if isinstance(mode, str) else tuple(str(m) for m in mode)


def layout(info: ModelInfo) -> OnnxLayout:
    """The model's transformer directory and pooling, or :class:`OnnxUnsupported`."""
    modules = _read_json(info.path / "modules.json")
    if not isinstance(modules, list):
        raise OnnxUnsupported(f"{info.path}: no modules.json")
    transformer: Path | None = None
    pooling: tuple[str, ...] = ()
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        where = info.path / str(module.get("path", ""))
        if kind not in _KNOWN_MODULES:
            raise OnnxUnsupported(f"{info.slug}: module {kind} has no ONNX equivalent here")
        if kind == "Transformer":
            st_config = _read_json(where / "sentence_bert_config.json") or {}
            if st_config.get("do_lower_case"):
                raise OnnxUnsupported(f"{info.slug}: sentence-transformers lower-cases its input")
            transformer = where
        elif kind == "Pooling":
            config = _read_json(where / "config.json") or {}
            pooling = _pooling_modes(config)
            if config.get("include_prompt") is False and info.prompts:
                raise OnnxUnsupported(f"{info.slug}: pooling excludes the prompt's tokens")
            if unknown := [m for m in pooling if m not in POOLING_MODES]:
                raise OnnxUnsupported(f"{info.slug}: pooling {', '.join(unknown)}")
    if transformer is None or not pooling:
        raise OnnxUnsupported(f"{info.slug}: modules.json holds no Transformer and Pooling")
    if not (transformer / "tokenizer.json").is_file():
        raise OnnxUnsupported(f"{info.slug}: no tokenizer.json (a slow-only tokenizer)")
    return OnnxLayout(transformer=transformer, pooling=pooling)


@lru_cache(maxsize=16)
def fingerprint(transformer: Path) -> str:
    """Hash of what the graph is made of: the transformer's config and weights (~0.1 s for
    MiniLM's 90 MB, once per process) and the export format."""
    digest = hashlib.sha256(f"sidecar-onnx-{EXPORT_FORMAT}\n".encode())
    names = ["config.json", *(n for n in WEIGHT_FILES if (transformer / n).is_file())]
    if len(names) == 1:
        raise OnnxUnsupported(f"{transformer}: no weights ({' or '.join(WEIGHT_FILES)})")
    for name in names:
        digest.update(f"{name}\n".encode())
        with (transformer / name).open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def default_onnx_dir() -> Path:
    """``$XDG_CACHE_HOME/mail-search-sidecar/onnx``: outside any checkout or state directory,
    so every clone, test run and worker of a machine shares one export per model version."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "mail-search-sidecar" / "onnx"


def graph_path(info: ModelInfo, onnx_dir: Path | None, precision: str = "float32") -> Path:
    """Where the graph of ``info``'s weights is (or is to be exported to). The int8 graph is
    cached beside the float32 one it is made from, named by the same fingerprint and the
    quantization recipe (:data:`indexer.adapters.embedding.onnx_quantize.QUANT_RECIPE`): it is made
    once
    per machine and recipe (tests and workers reuse it), and a changed recipe is a new file."""
    from indexer.adapters.embedding.onnx_quantize import QUANT_RECIPE

    found = layout(info)
    stem = f"{info.base_slug}-{fingerprint(found.transformer)}"
    if precision == "int8":
        stem = f"{stem}-int8-{QUANT_RECIPE}"
    elif precision != "float32":
        raise ValueError(f"embed precision must be int8 or float32, not {precision!r}")
    return (onnx_dir or default_onnx_dir()) / f"{stem}.onnx"


def kernel_path(cpuinfo: str | None = None) -> str:
    """Which integer kernels ONNX Runtime (MLAS) runs int8 MatMuls with on this CPU, from the
    ``flags`` of ``/proc/cpuinfo``: ``avx512-vnni`` or ``avx-vnni`` (one instruction per int8
    dot product: ~4x float32's arithmetic rate), ``avx2`` (u8s8 through 16-bit adds, ~2x), or
    ``other``. Reported by the bench and logged by the encoder: the speed-up to expect of the
    int8 graph depends on it (the vectors do not: the graph is the same everywhere)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "other"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
            break
    if "avx512_vnni" in flags:
        return "avx512-vnni"
    if "avx_vnni" in flags:
        return "avx-vnni"
    return "avx2" if "avx2" in flags else "other"


def pool(hidden: Any, mask: Any, modes: tuple[str, ...]) -> Any:
    """sentence-transformers' padded pooling (right padding), in float32, modes concatenated."""
    hidden = hidden.astype(np.float32, copy=False)
    weights = mask[..., None].astype(np.float32)
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(hidden[:, 0])
        elif mode == "max":
            out.append(np.where(weights > 0, hidden, -np.inf).max(axis=1))
        else:
            summed = (hidden * weights).sum(axis=1)
            out.append(summed / (counts if mode == "mean" else np.sqrt(counts)))
    return np.concatenate(out, axis=-1)


class OnnxEncoder:
    """Tokenize with the model's tokenizer.json, run the graph, pool: unnormalised vectors
    (the Embedder normalises every runtime's output the same way)."""

    def __init__(
        self, info: ModelInfo, graph: Path, *, max_tokens: int, threads: int, batch_size: int,
        precision: str = "float32", pooled_tokenizer: bool = True,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if not graph.is_file():
            raise GraphMissing(str(graph))
        found = layout(info)
        self.pooling = found.pooling
        self.dtype = precision  # the graph's precision (float32, or the int8 graph's)
        self.max_tokens = min(max_tokens, info.max_seq_length or max_tokens)
        self.batch_size = batch_size
        self._pooled_tokenizer = pooled_tokenizer
        self._tokenizer = Tokenizer.from_file(str(found.transformer / "tokenizer.json"))
        pad = self._tokenizer.padding or {}
        # tokenizer.json may fix its own truncation/padding (MiniLM's: 128, padded to 128):
        # sentence-transformers overrides both, so does this.
        self._tokenizer.enable_truncation(max_length=self.max_tokens)
        # padding is done per batch here (:meth:`encode`), to the batch's longest text
        self._tokenizer.no_padding()
        self._pad_id, self._pad_type = int(pad.get("pad_id", 0)), int(pad.get("pad_type_id", 0))
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self._session = ort.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"],
            disabled_optimizers=DISABLED_OPTIMIZERS,  # slower here: onnx_quantize's docstring
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self.dimension = int(self.encode(["dimension probe"], None).shape[1])

    def encode(self, texts: list[str], prompt: str | None) -> Any:
        """(n, dimension) float32 pooled vectors of ``texts`` (prompt prepended, if any), in
        length buckets: every text is tokenized first, then batches are cut from the texts
        sorted by token count (longest first) and padded only to their own longest, so short
        texts never pay for a long one's padding. A float32 vector does not depend on its
        batch; the int8 graph's scales activations per batch, which the gates measure."""
        prompted = [f"{prompt}{t}" for t in texts] if prompt else list(texts)
        # encode_batch runs on the tokenizers library's one thread pool per process: the
        # queries' encoder (``pooled_tokenizer=False``) tokenizes on its own thread instead,
        # never behind a document batch's texts (measured: half the query p99 under load)
        encoded = (self._tokenizer.encode_batch(prompted) if self._pooled_tokenizer
                   else [self._tokenizer.encode(text) for text in prompted])
        order = sorted(range(len(texts)), key=lambda i: -len(encoded[i].ids))
        rows = []
        for start in range(0, len(texts), self.batch_size):
            chunk = [encoded[i] for i in order[start : start + self.batch_size]]
            width = max(len(e.ids) for e in chunk)
            shape = (len(chunk), width)
            ids = np.full(shape, self._pad_id, dtype=np.int64)
            types = np.full(shape, self._pad_type, dtype=np.int64)
            mask = np.zeros(shape, dtype=np.int64)
            for row, e in enumerate(chunk):
                n = len(e.ids)
                ids[row, :n], types[row, :n], mask[row, :n] = e.ids, e.type_ids, 1
            given = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self._session.run(None, {name: given[name] for name in self._inputs})[0]
            rows.append(pool(hidden, mask, self.pooling))
        pooled = np.concatenate(rows)
        out = np.empty_like(pooled)
        out[order] = pooled
        return out
