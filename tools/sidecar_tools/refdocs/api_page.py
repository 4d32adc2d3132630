"""The API reference: the routes, parameters, answers and models of the search API's own
OpenAPI document (what ``/openapi.json`` serves), as a page and as the JSON file itself."""

from __future__ import annotations

import json
from typing import Any

from indexer.settings import Settings
from search_api.app import create_app

INTRO = """\
# API reference

The search API's contract is its OpenAPI document, served at `/openapi.json` by every
`sidecar serve` and saved here as [openapi.json](openapi.json) (give it to a client
generator: see [Search API](../search-api.md#the-openapi-contract-and-generated-clients)).
Every mailbox route needs `Authorization: Bearer <token>`; the statuses and their bodies are
listed per route below.

This page is generated from the API's document (`python -m sidecar_tools.refdocs`); a test
fails when it is out of date.
"""


def spec() -> dict[str, Any]:
    """The document as a production replica serves it (no dev pages, no console)."""
    return create_app(Settings(env="prod", console=False), vectors=False).openapi()


def spec_json() -> str:
    return json.dumps(spec(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema(schema: dict[str, Any]) -> str:
    """A short type for a table cell: a model's name links to its section below."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[`{name}`](#{name.lower()})"
    if "anyOf" in schema:
        kinds = [_schema(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(kinds)
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"list of {_schema(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_schema(extra)}" if isinstance(extra, dict) else "object"
    limits = [f"{sign} {schema[key]}" for key, sign in
              (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"),
               ("maxLength", "length ≤")) if key in schema]
    return kind + (f" ({', '.join(limits)})" if limits else "")


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", "",
             f"operationId `{op['operationId']}`, tag `{', '.join(op.get('tags', []))}`"
             + (", bearer token" if op.get("security") else ", no token"), ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | default | meaning |",
                  "|---|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            default = f"`{json.dumps(schema['default'])}`" if "default" in schema else ""
            lines.append(f"| `{p['name']}` | {p['in']} | {_schema(schema)} | "
                         f"{'yes' if p.get('required') else 'no'} | {default} | "
                         f"{_cell(p.get('description', ''))} |")
        lines.append("")
    lines += ["| status | body | meaning |", "|---|---|---|"]
    for status, answer in sorted(op["responses"].items()):
        body = answer.get("content", {}).get("application/json", {}).get("schema")
        retry = " (`Retry-After`)" if "Retry-After" in answer.get("headers", {}) else ""
        lines.append(f"| {status} | {_schema(body) if body else ''} | "
                     f"{_cell(answer.get('description', ''))}{retry} |")
    return [*lines, ""]


def _model(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    required = set(schema.get("required", []))
    props = schema.get("properties", {})
    if props:
        lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, sub in props.items():
            lines.append(f"| `{field}` | {_schema(sub)} | {'yes' if field in required else 'no'}"
                         f" | {_cell(sub.get('description', ''))} |")
    return [*lines, ""]


def render() -> str:
    document = spec()
    lines = [INTRO, f"API version `{document['info']['version']}`.", ""]
    schemes = document.get("components", {}).get("securitySchemes", {})
    for name, scheme in sorted(schemes.items()):
        lines += [f"Security scheme `{name}`: {scheme.get('type')} "
                  f"{scheme.get('scheme', '')}".rstrip() + ".", ""]
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            lines += _operation(path, method, op)
    lines += ["## Models", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += _model(name, schema)
    return "\n".join(lines).rstrip() + "\n"
