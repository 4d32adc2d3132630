"""``search_api`` reaches the pipeline only through the ports ``sidecar serve`` wires."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "search_api"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


# ``sidecar serve``'s module, the API's composition root: it wires the ports.
WIRING = ROOT / "cli.py"


def test_search_api_never_imports_the_pipeline() -> None:
    offenders = {
        str(path.relative_to(ROOT.parent)): sorted(
            m for m in imported_modules(path) if m.startswith("indexer.pipeline")
        )
        for path in ROOT.rglob("*.py") if path != WIRING
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert any(m.startswith("indexer.pipeline") for m in imported_modules(WIRING))
