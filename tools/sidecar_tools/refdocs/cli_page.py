"""The CLI reference: every ``sidecar`` command with its usage, arguments and options, read
from the Typer app's click objects (what ``--help`` prints, without a terminal's width or
colours). Typer vendors its own click, so they are read by duck typing, not ``isinstance``."""

from __future__ import annotations

from typing import Any

import typer.main

from indexer.cli.main import app

INTRO = """\
# CLI reference

`sidecar --help` lists every command and `sidecar COMMAND --help` its options. Commands
marked *tooling* come from the `mail-search-sidecar-tools` distribution (`pip install
'mail-search-sidecar[local]'`, or `uv sync` in a clone) and are absent from a production
install of the runtime alone. Every command also honours the `SIDECAR_*` settings
([configuration reference](configuration.md)).

This page is generated from the Typer app (`python -m sidecar_tools.refdocs`); a test fails
when it is out of date.
"""


def _is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def _context(command: Any, name: str, parent: Any = None) -> Any:
    return command.context_class(command, info_name=name, parent=parent)


def _module(command: Any) -> str:
    if _is_group(command):
        subs = list(command.commands.values())
        return _module(subs[0]) if subs else ""
    return getattr(command.callback, "__module__", "") or ""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _params(command: Any, ctx: Any) -> list[str]:
    """One row per argument and option, as ``--help`` words them (its default included)."""
    rows: list[str] = []
    for param in command.get_params(ctx):
        if param.name == "help" or getattr(param, "hidden", False):
            continue
        kind = param.display_type(ctx).strip("<>")
        if param.param_type_name == "argument":
            name = f"`{param.name.upper()}`" + (" …" if param.nargs != 1 else "")
            kind = f"argument ({kind})" + ("" if param.required else ", optional")
            help_text = getattr(param, "help", None) or ""
        else:
            record = param.get_help_record(ctx)
            name = ", ".join(f"`{o.strip()}`" for o in record[0].split(", "))
            if param.required:
                kind += ", required"
            help_text = record[1]
        rows.append(f"| {_cell(name)} | {_cell(kind)} | {_cell(help_text)} |")
    return rows


def _command(path: list[str], command: Any, parent: Any, lines: list[str]) -> None:
    ctx = _context(command, path[-1], parent)
    title = " ".join(path)
    tooling = " *(tooling)*" if _module(command).startswith("sidecar_tools") else ""
    lines += [f"{'#' * len(path)} `{title}`{tooling}", ""]
    if command.help:
        lines += [command.help.strip().split("\f")[0].strip(), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```", f"{title} {usage}".rstrip(), "```", ""]
    rows = _params(command, ctx)
    if rows:
        lines += ["| name | type | meaning |", "|---|---|---|", *rows, ""]
    if _is_group(command):
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                _command([*path, name], sub, ctx, lines)


def render() -> str:
    """The whole page: the root's options, then every command in alphabetical order."""
    root: Any = typer.main.get_command(app)
    ctx = _context(root, "sidecar")
    lines = [INTRO, "## `sidecar`", ""]
    rows = _params(root, ctx)
    lines += ["| name | type | meaning |", "|---|---|---|", *rows, ""]
    for name in sorted(root.list_commands(ctx)):
        command = root.get_command(ctx, name)
        if command is not None and not command.hidden:
            _command(["sidecar", name], command, ctx, lines)
    return "\n".join(lines).rstrip() + "\n"
