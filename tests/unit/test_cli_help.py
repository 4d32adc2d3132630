"""Issue 40 part 6: ``sidecar --help`` in panels — the production roles first, then what an
operator runs, the local stack and tooling, the benchmarks — and choices offered as choices."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from indexer.cli.main import BENCH, LOCAL, OPERATE, RUN, app


def _panels(text: str) -> dict[str, list[str]]:
    """Each panel's title and its commands, in the order shown."""
    panels: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        title = re.match(r"^╭─ (.+?) ─", line)
        if title:
            current = panels.setdefault(title.group(1), [])
            continue
        row = re.match(r"^│ ([a-z][a-z-]*)\s{2,}", line)
        if row and current is not None:
            current.append(row.group(1))
    return panels


def test_help_groups_the_commands_with_the_roles_first() -> None:
    shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "160"}, terminal_width=160)
    assert shown.exit_code == 0, shown.output
    panels = _panels(shown.output)
    assert list(panels)[1:] == [RUN, OPERATE, LOCAL, BENCH]  # after the options
    assert panels[RUN] == ["tail", "worker", "serve"]
    assert {"init", "backfill", "ingest", "reindex", "dlq"} <= set(panels[OPERATE])
    assert {"stack", "demo"} <= set(panels[LOCAL])
    assert panels[BENCH] and all(c.startswith(("bench", "eval", "plan")) for c in panels[BENCH])


def test_choices_are_listed_and_checked() -> None:
    shown = CliRunner().invoke(app, ["worker", "--help"], env={"COLUMNS": "160"})
    assert "all|fulltext|vectors" in shown.output
    refused = CliRunner().invoke(app, ["worker", "--role", "everything"])
    assert refused.exit_code == 2 and "everything" in refused.output
