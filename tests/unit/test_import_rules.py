"""The layers of the runtime, enforced on the source: who may import which client library,
what the pure core and query builder import, and that no import circle exists.

Every import counts — module level and inside functions — except those under
``if TYPE_CHECKING:`` (types only, never executed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ("indexer", "search_api")
ENGINE_CLIENTS = {"boto3", "botocore", "opensearchpy", "qdrant_client", "qdrant_edge", "redis",
                  "sentence_transformers", "torch", "transformers", "grpc"}
FRAMEWORKS = {"celery", "fastapi", "starlette", "uvicorn", "kombu"}
TOOLING = {"sidecar_tools", "moto"}


def runtime_modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the runtime packages."""
    found: dict[str, Path] = {}
    for package in RUNTIME:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, module: str) -> Iterator[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    def walk(node: ast.AST) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue
            if isinstance(child, ast.Import):
                yield from (a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")[: -child.level] if path.stem != "__init__" \
                        else module.split(".")[: len(module.split(".")) - child.level + 1]
                    base = ".".join([*package, base] if base else package)
                yield base
                yield from (f"{base}.{a.name}" for a in child.names)
            yield from walk(child)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")))


MODULES = runtime_modules()
IMPORTS = {name: set(imports_of(path, name)) for name, path in MODULES.items()}


def _top(name: str) -> str:
    return name.split(".")[0]


def _violations(allowed: object, banned: set[str], prefix: tuple[str, ...]) -> list[str]:
    out = []
    for module, names in IMPORTS.items():
        if not module.startswith(prefix) or module.startswith(allowed):  # type: ignore[arg-type]
            continue
        out += [f"{module} imports {n}" for n in sorted(names) if _top(n) in banned]
    return out


def test_only_adapters_import_engine_clients() -> None:
    assert _violations(("indexer.adapters",), ENGINE_CLIENTS, RUNTIME) == []


def test_runtime_never_imports_the_tooling() -> None:
    assert _violations((), TOOLING, RUNTIME) == []


@pytest.mark.parametrize("package", ["indexer.core", "search_api.query"])
def test_pure_layers_import_no_client_library_nor_framework(package: str) -> None:
    banned = ENGINE_CLIENTS | FRAMEWORKS | {"pydantic_settings", "prometheus_client"}
    assert _violations((), banned, (package,)) == []
    # ... and nothing of the runtime outside the pure layers
    pure = ("indexer.core", "search_api.query")
    leaks = [f"{m} imports {n}" for m, names in IMPORTS.items() if m.startswith(package)
             for n in names if _top(n) in RUNTIME and not n.startswith(pure)]
    assert leaks == []


def test_search_api_does_not_import_the_pipeline() -> None:
    """Only ``search_api.cli`` (``sidecar serve``, the API's composition root) may: it wires
    the pipeline's read-repair queues into the app through its ports."""
    leaks = [f"{m} imports {n}" for m, names in IMPORTS.items()
             if m.startswith("search_api") and m != "search_api.cli"
             for n in names if n.startswith("indexer.pipeline")]
    assert leaks == []
    assert any(n.startswith("indexer.pipeline") for n in IMPORTS["search_api.cli"])


def _graph() -> dict[str, set[str]]:
    """Module → runtime modules it imports (``from a import b`` counts ``a.b`` if a module)."""
    return {m: {n for n in names if n in MODULES and n != m} for m, names in IMPORTS.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of ``graph`` (empty if none), by depth-first search."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_no_import_circle_in_the_runtime() -> None:
    graph = _graph()
    # package __init__ modules are parents, not dependencies: importing a.b runs a/__init__
    assert find_cycle(graph) == []


def test_cycle_finder_finds_a_circle() -> None:
    """The rule above can fail: a planted circle is found."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
