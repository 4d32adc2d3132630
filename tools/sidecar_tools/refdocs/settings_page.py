"""The configuration reference: one row per :class:`Settings` field, read from its type,
default, constraints and description (the field's own text is the one documentation)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from indexer.settings import Settings, group_of
from indexer.settings.api import ApiSettings
from indexer.settings.aws import AwsSettings
from indexer.settings.embedding import EmbeddingSettings
from indexer.settings.observability import ObservabilitySettings
from indexer.settings.opensearch import OpenSearchSettings
from indexer.settings.pipeline import PipelineSettings
from indexer.settings.qdrant import QdrantSettings
from indexer.settings.store import StoreSettings
from sidecar_tools.stack.settings import StackSettings

# A section per settings group (the class that declares the field, its module's docstring
# as the section's opening line), then the tooling's own knobs.
SECTIONS: tuple[tuple[type, str], ...] = (
    (StoreSettings, "Mail store"), (AwsSettings, "AWS"), (OpenSearchSettings, "OpenSearch"),
    (QdrantSettings, "Qdrant"), (EmbeddingSettings, "Encoder"), (PipelineSettings, "Pipeline"),
    (ApiSettings, "Search API"), (ObservabilitySettings, "Metrics and logs"),
)
LOCAL_STACK = "Local stack (tooling only)"

INTRO = """\
# Configuration reference

Every command reads its settings from `SIDECAR_*` environment variables
(`indexer/settings/`, one module per group), so two stacks or two tables can live on one
machine. A value that does not fit its type or range stops the command at start with one line
naming the variable.
Lists are JSON (`SIDECAR_DEV_MAILBOXES='["me"]'`); secrets are never logged or shown.
`eval "$(sidecar stack env)"` exports the running local stack's addresses.

This page is generated from the settings' own definitions
(`python -m sidecar_tools.refdocs`); a test fails when it is out of date.
"""


def variable(name: str) -> str:
    """The environment variable of a field (the settings' ``env_prefix``, upper case)."""
    return f"SIDECAR_{name.upper()}"


def _section(name: str) -> str:
    if name not in Settings.model_fields:
        return LOCAL_STACK
    group = group_of(name)
    return next(title for cls, title in SECTIONS if cls is group)


def _optional(annotation: Any) -> tuple[Any, bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _type(field: FieldInfo) -> str:
    inner, _ = _optional(field.annotation)
    if get_origin(inner) is Literal:
        return "one of " + ", ".join(f"`{v}`" for v in get_args(inner))
    if get_origin(inner) is tuple:
        item = get_args(inner)[0]
        if get_origin(item) is Literal:
            return "JSON list of " + ", ".join(f"`{v}`" for v in get_args(item))
        return "JSON list of strings"
    names = {bool: "boolean", int: "integer", float: "number", str: "string",
             Path: "path", SecretStr: "secret"}
    return names.get(inner, getattr(inner, "__name__", str(inner)))


def _constraints(field: FieldInfo) -> str:
    parts: list[str] = []
    for item in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
        min_length = getattr(item, "min_length", None)
        if min_length:
            parts.append(f"at least {min_length}")
    return ", ".join(parts)


def _default(field: FieldInfo) -> str:
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return f"`{json.dumps(list(value))}`"
    if value == "":
        return "empty"
    return f"`{value}`"


def _first_paragraph(cls: type) -> str:
    """The group module's opening paragraph, on one line."""
    doc = sys.modules[cls.__module__].__doc__ or ""
    return " ".join(doc.split("\n\n")[0].split())


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The whole page, deterministic (fields in their definition order within a section)."""
    grouped: dict[str, list[str]] = {}
    for name, field in StackSettings.model_fields.items():
        kind = _type(field)
        limits = _constraints(field)
        if limits:
            kind = f"{kind} ({limits})"
        row = (f"| `{variable(name)}` | {_cell(kind)} | {_default(field)} | "
               f"{_cell(field.description or '')} |")
        grouped.setdefault(_section(name), []).append(row)
    lines = [INTRO]
    intros = {title: _first_paragraph(cls) for cls, title in SECTIONS}
    intros[LOCAL_STACK] = "The local stack's own knobs: no runtime process reads them."
    for title in [t for _, t in SECTIONS] + [LOCAL_STACK]:
        if title not in grouped:
            continue
        lines += [f"## {title}", "", intros[title], "",
                  "| variable | type | default | meaning |",
                  "|---|---|---|---|", *grouped[title], ""]
    return "\n".join(lines)
