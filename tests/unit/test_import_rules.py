"""The core imports no client library; only adapters talk to engines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = {"boto3", "botocore", "opensearchpy", "qdrant_client", "qdrant_edge", "redis", "celery",
           "sentence_transformers", "torch", "fastapi"}


@pytest.mark.parametrize("path", sorted((ROOT / "indexer" / "core").glob("*.py")), ids=lambda p: p.name)
def test_core_imports_no_client_library(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in CLIENTS, f"{path.name} imports {name}"
            assert not name.startswith("indexer.") or name.startswith("indexer.core"), name


VECTOR_CLIENTS = {"qdrant_client", "qdrant_edge", "grpc"}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in [*(ROOT / "indexer").rglob("*.py"), *(ROOT / "search_api").rglob("*.py")]
           if p.parent.name != "adapters"),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_vector_engines_only_behind_their_adapters(path: Path) -> None:
    """The vector store port: only ``indexer/adapters/`` imports a Qdrant client (issue 13)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            assert name.split(".")[0] not in VECTOR_CLIENTS, f"{path} imports {name}"
