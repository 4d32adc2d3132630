"""The committed reference pages are what the code generates now: the configuration page from
``Settings``, the CLI page from the Typer app, the API page and ``openapi.json`` from the API's
OpenAPI document. A change to any of them without ``python -m sidecar_tools.refdocs`` fails
here, naming the page."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar_tools.refdocs.__main__ import PAGES, REFERENCE, stale, write


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_committed_page_equals_the_generated_one(name: str) -> None:
    committed = (REFERENCE / name).read_text(encoding="utf-8")
    assert committed == PAGES[name](), (
        f"docs/reference/{name} is out of date: run `.venv/bin/python -m sidecar_tools.refdocs`")


def test_the_check_sees_a_changed_page(tmp_path: Path) -> None:
    write(tmp_path)
    assert stale(tmp_path) == []
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text(encoding="utf-8").replace("SIDECAR_TABLE", "SIDECAR_TABEL"),
                    encoding="utf-8")
    (tmp_path / "cli.md").unlink()
    assert stale(tmp_path) == ["configuration.md", "cli.md"]
