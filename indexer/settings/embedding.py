"""The encoder: which model, which text of a message (the recipe), its runtime, precision,
threads and batch sizes. A change of model, precision or truncation is a reindex.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from indexer.core.recipes import DEFAULT_RECIPE, Recipe


class EmbeddingSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    embed_batch_size: int = Field(default=32, ge=1, description="Texts per encoder batch.")
    embed_max_tokens: int = Field(
        default=256, ge=16, le=512,
        description="Encoder truncation; named in the collection (a change is a reindex).",
    )
    embed_threads: int = Field(default=2, ge=1, description="Threads of the encoder.")
    embed_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Model precision; auto = bfloat16 where the CPU has native bfloat16.",
    )
    embed_device: str = Field(
        default="cpu",
        pattern=r"^(cpu|cuda(:\d+)?|mps)$",
        description="torch device of the encoder (cpu, cuda, cuda:N, mps); not cpu needs "
        "SIDECAR_EMBED_RUNTIME=torch.",
    )
    embed_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="The encoder: onnx = ONNX Runtime, no torch (the [vectors] extra); torch = "
        "sentence-transformers (the [torch] extra: GPUs, bfloat16, models without an ONNX "
        "graph). Same vectors, so no reindex.",
    )
    embed_precision: Literal["int8", "float32"] = Field(
        default="int8",
        description="onnx runtime: int8 = the int8 graph quantized from the same weights at "
        "export (docs/encoder.md; float32 with SIDECAR_EMBED_RUNTIME=torch); named in the "
        "collection (-int8), so a change is a `sidecar reindex --vectors`.",
    )
    embed_onnx_dir: Path | None = Field(
        default=None,
        description="Where the exported ONNX graphs are (`sidecar export-onnx`); unset = "
        "~/.cache/mail-search-sidecar/onnx (XDG_CACHE_HOME).",
    )
    embed_model: str = Field(
        default="",
        description="A sentence-transformers model directory or installed model package; "
        "empty = the shipped all-MiniLM-L6-v2. Changing it is a `sidecar reindex --vectors`.",
    )
    embed_models: tuple[str, ...] = Field(
        default=(),
        description="Other models this process may embed with (a change of model in progress).",
    )
    embed_recipe: Recipe = Field(
        default=DEFAULT_RECIPE,
        description="The embedded text of a message (forai, or subject-forai: the stripped "
        "subject, a blank line, forai). Changing it is a `sidecar reindex --vectors`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _torch_embeds_float32(cls, data: Any) -> Any:
        """int8 is the onnx runtime's int8 graph, which torch does not run: on
        ``SIDECAR_EMBED_RUNTIME=torch`` the precision left unset is float32 (set to int8 there,
        the encoder refuses it with a line saying so)."""
        if (isinstance(data, dict) and data.get("embed_runtime") == "torch"
                and data.get("embed_precision") is None):
            return {**data, "embed_precision": "float32"}
        return data
