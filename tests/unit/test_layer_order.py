"""The layer order of the runtime (docs/concepts/architecture.md), enforced on the source.

Inside ``indexer/``, a module imports only from its own layer or the layers below it::

    core  <  settings, logs, metrics, otel(_guard)  <  adapters  <  pipeline  <  sources, ops  <  cli

The indexer never imports ``search_api``; ``search_api`` sits above the adapters and never
imports ``indexer.sources``, ``indexer.ops`` or ``indexer.cli`` (that it reaches
``indexer.pipeline`` only from its composition root is ``test_import_rules.py``'s rule). Every
module of ``indexer/`` must belong to a layer, so a new top-level module or package is placed
deliberately (add it to ``LAYERS``).

Imports are read with ``ast``: every ``import`` and ``from … import …``, at module level and
inside functions, relative ones resolved; those under ``if TYPE_CHECKING:`` do not count (types
only, never executed), as in ``test_import_rules.py``. ``from a import b`` counts ``a`` and
``a.b``. The last test plants violations in a synthetic package to prove the checker fails.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("indexer", "search_api")

# Lowest first; modules of one entry are one layer and may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("indexer.core",),
    # configuration, logs, metrics, traces: the process's own concerns
    ("indexer.settings", "indexer.logs", "indexer.metrics", "indexer.otel", "indexer.otel_guard"),
    ("indexer.adapters",),
    ("indexer.pipeline",),
    ("indexer.sources", "indexer.ops"),
    ("indexer.cli",),
)
# Parts of the indexer that the API must not import: the layers above the pipeline.
NOT_FOR_THE_API = ("indexer.sources", "indexer.ops", "indexer.cli")

# Known violations, each (importing module, imported module) with why it stays. An entry that no
# longer occurs fails the test, so the list only shrinks.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (or module.name)
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.module} imports {self.target}"


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the runtime packages under ``root``."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _types_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path, module: str, root: Path) -> Iterator[Import]:
    """Every import of ``path`` (absolute names; relative imports resolved)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    where = path.relative_to(root)

    def walk(node: ast.AST) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if _types_only(child):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, f"{where}:{child.lineno}")
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package[: len(package) - (child.level - 1)]
                    base = ".".join([*parent, base] if base else parent)
                yield Import(module, base, f"{where}:{child.lineno}")
                for alias in child.names:
                    yield Import(module, f"{base}.{alias.name}", f"{where}:{child.lineno}")
            yield from walk(child)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")))


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(name: str) -> int | None:
    for rank, prefixes in enumerate(LAYERS):
        if any(_under(name, p) for p in prefixes):
            return rank
    return None


def unplaced(root: Path) -> list[str]:
    """Modules of ``indexer/`` that belong to no layer (the package itself excepted)."""
    return sorted(m for m in modules(root)
                  if _under(m, "indexer") and m != "indexer" and layer_of(m) is None)


def violations(root: Path) -> list[Import]:
    """Every import against the layer order, known ones included."""
    out: list[Import] = []
    for module, path in modules(root).items():
        for imp in imports_of(path, module, root):
            if _under(module, "indexer"):
                if _under(imp.target, "search_api"):
                    out.append(imp)
                    continue
                mine, theirs = layer_of(module), layer_of(imp.target)
                if mine is not None and theirs is not None and theirs > mine:
                    out.append(imp)
            elif any(_under(imp.target, p) for p in NOT_FOR_THE_API):
                out.append(imp)
    return sorted(set(out), key=str)


def _allowed(imp: Import) -> bool:
    return any(imp.module == m and _under(imp.target, t) for m, t in ALLOWED)


def test_every_indexer_module_has_a_layer() -> None:
    assert unplaced(ROOT) == []


def test_no_import_against_the_layer_order() -> None:
    assert [str(v) for v in violations(ROOT) if not _allowed(v)] == []


def test_every_allowed_violation_still_occurs() -> None:
    """An allow-list entry whose import is gone is removed, so the list never hides a new one."""
    found = violations(ROOT)
    stale = [pair for pair in ALLOWED
             if not any(v.module == pair[0] and _under(v.target, pair[1]) for v in found)]
    assert stale == []


def _plant(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_finds_planted_violations(tmp_path: Path) -> None:
    """The rules above can fail: a synthetic tree with one violation of each kind."""
    _plant(tmp_path, {
        "indexer/__init__.py": "",
        "indexer/settings.py": "from indexer.core.items import x\n",  # down: fine
        "indexer/core/__init__.py": "",
        # up, relative and inside a function
        "indexer/core/items.py": "def f():\n    from ..pipeline import sync\n",
        "indexer/core/types.py": ("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from indexer.cli import main\n"),
        "indexer/pipeline/__init__.py": "",
        "indexer/pipeline/sync.py": "from . import sync\nimport indexer.adapters.dynamodb.store\n",
        "indexer/sources/tail.py": "import indexer.ops.purge\n",  # same layer: fine
        "indexer/ops/purge.py": "from search_api.models import Hit\n",  # the indexer -> API
        "indexer/wiring.py": "",  # no layer
        "search_api/__init__.py": "",
        "search_api/routes.py": "from indexer.adapters import opensearch\n",  # fine
        "search_api/service.py": "from indexer.sources.tail import Tailer\n",  # API -> sources
    })
    assert [str(v) for v in violations(tmp_path)] == [
        "indexer/core/items.py:2: indexer.core.items imports indexer.pipeline",
        "indexer/core/items.py:2: indexer.core.items imports indexer.pipeline.sync",
        "indexer/ops/purge.py:1: indexer.ops.purge imports search_api.models",
        "indexer/ops/purge.py:1: indexer.ops.purge imports search_api.models.Hit",
        "search_api/service.py:1: search_api.service imports indexer.sources.tail",
        "search_api/service.py:1: search_api.service imports indexer.sources.tail.Tailer",
    ]
    assert unplaced(tmp_path) == ["indexer.wiring"]
