"""Every setting is documented: each field of :class:`Settings` appears as its ``SIDECAR_*``
variable in the README's settings table."""

from __future__ import annotations

import re
from pathlib import Path

from indexer.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Settings")
    return text[start : text.index("\n## ", start + 1)]


def test_every_setting_is_in_the_readme_table() -> None:
    documented = set(re.findall(r"`(SIDECAR_[A-Z0-9_]+)`", _table()))
    missing = sorted(f"SIDECAR_{n.upper()}" for n in Settings.model_fields
                     if f"SIDECAR_{n.upper()}" not in documented)
    assert missing == []


def test_the_table_names_no_setting_that_does_not_exist() -> None:
    rows = [line for line in _table().splitlines() if line.startswith("| `SIDECAR_")]
    known = {f"SIDECAR_{n.upper()}" for n in Settings.model_fields}
    named = {v for row in rows for v in re.findall(r"`(SIDECAR_[A-Z0-9_]+)`", row.split("|")[1])}
    assert named - known == set()
