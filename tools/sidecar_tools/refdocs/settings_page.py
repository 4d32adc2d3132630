"""The configuration reference: one row per :class:`Settings` field, read from its type,
default, constraints and description (the field's own text is the one documentation)."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from indexer.settings import Settings

# Sections of the page, by field-name prefix (the first that matches wins); a field no
# section names is listed under "Other" until it is placed here.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Mail store and AWS", ("table", "state_table", "aws_", "dynamodb", "s3_", "export_")),
    ("OpenSearch", ("opensearch_url", "opensearch_shards", "opensearch_replicas",
                    "opensearch_wait", "opensearch_refresh", "opensearch_index",
                    "opensearch_auth",
                    "opensearch_aws", "opensearch_visible", "opensearch_user",
                    "opensearch_pass", "opensearch_verify", "opensearch_ca",
                    "opensearch_pool", "search_timeout")),
    ("Qdrant", ("qdrant_",)),
    ("Pipeline", ("redis_", "queue_prefix", "batch_messages", "max_retries", "retry_backoff",
                  "transient_retry", "visibility_timeout", "dlq_")),
    ("Encoder", ("embed_",)),
    ("Search API", ("api_", "env", "dev_mailboxes", "cursor_key", "expose_scores", "console")),
    ("Metrics and logs", ("metrics_", "log_level")),
    ("Local stack (tooling only)", ("state_dir", "moto_port", "opensearch_heap")),
)

INTRO = """\
# Configuration reference

Every command reads its settings from `SIDECAR_*` environment variables
(`indexer/settings.py`), so two stacks or two tables can live on one machine. A value that
does not fit its type or range stops the command at start with one line naming the variable.
Lists are JSON (`SIDECAR_DEV_MAILBOXES='["me"]'`); secrets are never logged or shown.
`eval "$(sidecar stack env)"` exports the running local stack's addresses.

This page is generated from the settings' own definitions
(`python -m sidecar_tools.refdocs`); a test fails when it is out of date.
"""


def variable(name: str) -> str:
    """The environment variable of a field (the settings' ``env_prefix``, upper case)."""
    return f"SIDECAR_{name.upper()}"


def _section(name: str) -> str:
    for title, prefixes in SECTIONS:
        if any(name.startswith(p) for p in prefixes):
            return title
    return "Other"


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


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The whole page, deterministic (fields in their definition order within a section)."""
    grouped: dict[str, list[str]] = {}
    for name, field in Settings.model_fields.items():
        kind = _type(field)
        limits = _constraints(field)
        if limits:
            kind = f"{kind} ({limits})"
        row = (f"| `{variable(name)}` | {_cell(kind)} | {_default(field)} | "
               f"{_cell(field.description or '')} |")
        grouped.setdefault(_section(name), []).append(row)
    lines = [INTRO]
    for title in [t for t, _ in SECTIONS] + ["Other"]:
        if title not in grouped:
            continue
        lines += [f"## {title}", "", "| variable | type | default | meaning |",
                  "|---|---|---|---|", *grouped[title], ""]
    return "\n".join(lines)
