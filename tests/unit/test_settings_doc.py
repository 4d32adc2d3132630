"""Every setting is documented: each field of :class:`Settings` has a description and appears
as its ``SIDECAR_*`` variable in the generated configuration reference
(``docs/reference/configuration.md``), and the page names no setting that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

from indexer.settings import Settings
from sidecar_tools.stack.settings import StackSettings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"


def _rows() -> list[str]:
    return [line for line in PAGE.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `SIDECAR_")]


def test_every_setting_has_a_description() -> None:
    assert [n for n, f in Settings.model_fields.items() if not (f.description or "").strip()] == []


def test_every_setting_is_on_the_configuration_page() -> None:
    documented = {re.findall(r"`(SIDECAR_[A-Z0-9_]+)`", row)[0] for row in _rows()}
    missing = sorted(f"SIDECAR_{n.upper()}" for n in Settings.model_fields
                     if f"SIDECAR_{n.upper()}" not in documented)
    assert missing == []


def test_the_page_names_no_setting_that_does_not_exist() -> None:
    known = {f"SIDECAR_{n.upper()}" for n in StackSettings.model_fields}
    named = {v for row in _rows() for v in re.findall(r"`(SIDECAR_[A-Z0-9_]+)`", row.split("|")[1])}
    assert named - known == set()
