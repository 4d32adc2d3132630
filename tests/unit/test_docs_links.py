"""The documentation's files hold together: every relative link of a page under ``docs/`` (and of
the README) names a file that exists, and every JSON under ``docs/`` (a run's figures) is linked
from some page, so no dump lies there that no page explains.

``mkdocs build --strict`` (``test_docs_site.py``) checks the links between pages of the nav; this
also covers links to files mkdocs only copies (JSON, images), pages outside the nav, and the
README, which is not part of the site."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
# A code span may run over a line break, not over a blank line.
INLINE_CODE = re.compile(r"`(?:[^`\n]|\n(?!\s*\n))*`")
# [text](target) and ![alt](target); the target ends at whitespace (a title may follow) or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...


def link_targets(page: Path) -> list[str]:
    """The link targets written in ``page``, outside code blocks and inline code."""
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def resolve(page: Path, target: str) -> Path | None:
    """The file a relative link of ``page`` points at (``None`` for external or in-page links)."""
    if EXTERNAL.match(target) or target.startswith("#"):
        return None
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    return (page.parent / path).resolve()


def broken_links(pages: list[Path], base: Path) -> list[str]:
    """``page -> target`` (the page relative to ``base``) for each link naming no file."""
    out = []
    for page in pages:
        for target in link_targets(page):
            file = resolve(page, target)
            if file is not None and not file.exists():
                out.append(f"{page.relative_to(base)} -> {target}")
    return out


def unlinked_json(docs: Path) -> list[str]:
    linked = {resolve(page, target) for page in docs.rglob("*.md") for target in link_targets(page)}
    return sorted(str(j.relative_to(docs)) for j in docs.rglob("*.json") if j.resolve() not in linked)


def pages() -> list[Path]:
    return [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]


def test_every_relative_link_resolves() -> None:
    assert broken_links(pages(), ROOT) == []


def test_every_json_under_docs_is_linked_from_a_page() -> None:
    assert unlinked_json(DOCS) == []


def test_no_figures_or_images_at_the_docs_root() -> None:
    """A run's JSON and plots live beside its page (``docs/results/runs/``), a screenshot beside
    the page that shows it: the root holds pages only."""
    assert sorted(p.name for p in DOCS.iterdir() if p.is_file() and p.suffix != ".md") == []


def test_every_run_page_is_listed_on_the_benchmarks_page_and_in_the_nav() -> None:
    """A dated run under ``docs/results/runs/`` is found from the reference page and the site."""
    index = DOCS / "results" / "benchmarks.md"
    listed = {resolve(index, target) for target in link_targets(index)}
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    problems = []
    for page in sorted((DOCS / "results" / "runs").glob("*.md")):
        if page.resolve() not in listed:
            problems.append(f"{page.name} is not linked from docs/results/benchmarks.md")
        if f"results/runs/{page.name}" not in nav:
            problems.append(f"{page.name} is not in the nav (mkdocs.yml)")
    assert problems == []


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "results" / "runs").mkdir(parents=True)
    (docs / "results" / "runs" / "a.json").write_text("{}", encoding="utf-8")
    (docs / "results" / "runs" / "b.json").write_text("{}", encoding="utf-8")
    (docs / "results" / "runs" / "a.md").write_text(
        "# A\n\nFigures of `sidecar\nbench`: [`a.json`](a.json). Back to [the index]"
        "(../../index.md#top).\n"
        "```bash\nsidecar bench --json b.json  # [not a link](b.json)\n```\n", encoding="utf-8")
    (docs / "index.md").write_text(
        "# Home\n\n[a run](results/runs/a.md), [gone](results/old.md), [web](https://x.org/y.md),"
        " `[code](nowhere.md)`, [here](#home)\n", encoding="utf-8")
    return docs


def test_the_checks_see_a_planted_broken_link_and_an_unlinked_json(planted: Path) -> None:
    assert broken_links(sorted(planted.rglob("*.md")), planted.parent) == ["docs/index.md -> results/old.md"]
    # b.json is named only inside a code block: that is no link
    assert unlinked_json(planted) == ["results/runs/b.json"]
    (planted / "index.md").write_text("[a run](results/runs/a.md), [b](results/runs/b.json)\n",
                                      encoding="utf-8")
    assert broken_links(sorted(planted.rglob("*.md")), planted.parent) == []
    assert unlinked_json(planted) == []
