"""``python -m sidecar_tools.refdocs [--check]``: write the generated reference pages, or
with ``--check`` exit 1 naming each page that differs from what the code generates now."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from sidecar_tools.refdocs import api_page, cli_page, settings_page

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "reference"
PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": settings_page.render,
    "cli.md": cli_page.render,
    "api.md": api_page.render,
    "openapi.json": api_page.spec_json,
}


def stale(directory: Path = REFERENCE) -> list[str]:
    """The pages whose committed text is not what the code generates now."""
    return [name for name, render in PAGES.items()
            if not (directory / name).is_file()
            or (directory / name).read_text(encoding="utf-8") != render()]


def write(directory: Path = REFERENCE) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (directory / name).write_text(render(), encoding="utf-8")


def main(argv: list[str]) -> int:
    if "--check" in argv:
        names = stale()
        for name in names:
            print(f"docs/reference/{name} is out of date: run "
                  "`.venv/bin/python -m sidecar_tools.refdocs`", file=sys.stderr)
        return 1 if names else 0
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
