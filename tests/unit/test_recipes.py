"""The embedded text of a message under each recipe (pure), and the subject-prefix rule shared
with the OpenSearch mapping (one rule: the mapping's char filter holds the same pattern)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.core.recipes import (
    DEFAULT_RECIPE,
    RECIPES,
    SUBJECT_PREFIX,
    embedded_text,
    recipe,
    strip_subject,
)

MAPPINGS = Path(__file__).resolve().parents[2] / "indexer" / "mappings"


@pytest.mark.parametrize(
    ("subject", "want"),
    [
        ("Re: cache flush on R10000", "cache flush on R10000"),
        ("RE: Fwd: AW: Re[2]: it", "it"),
        ("[PATCH v2 3/5] MIPS: fix cache flush", "MIPS: fix cache flush"),  # MIPS: is no prefix
        ("Re: [notmuch] [PATCH] tags", "tags"),
        ("  Antw:  SV: WG: hello  ", "hello"),
        ("Fw: forwarded", "forwarded"),
        ("Reply to all", "Reply to all"),  # "Re" must be followed by ":"
        ("Re:", ""),
        ("[list]", ""),
        ("", ""),
    ],
)
def test_strip_subject(subject: str, want: str) -> None:
    assert strip_subject(subject) == want


def test_subject_forai() -> None:
    assert embedded_text("subject-forai", "Re: [mips] Oops", "The trace.") == "Oops\n\nThe trace."
    assert embedded_text("subject-forai", None, "The trace.") == "The trace."
    assert embedded_text("subject-forai", "Re: [mips]", "The trace.") == "The trace."
    assert embedded_text("forai", "Re: Oops", "The trace.") == "The trace."


@pytest.mark.parametrize("name", RECIPES)
@pytest.mark.parametrize("forai", [None, "", " \n\t"])
def test_no_text_without_forai(name: str, forai: str | None) -> None:
    assert embedded_text(recipe(name), "A subject", forai) is None


@given(st.text(), st.text().filter(str.strip))
def test_subject_forai_ends_with_forai_and_starts_with_no_prefix(subject: str, forai: str) -> None:
    text = embedded_text("subject-forai", subject, forai)
    assert text is not None and text.endswith(forai)
    head = text.removesuffix(forai)
    assert head == "" or (head.endswith("\n\n") and not re.match(SUBJECT_PREFIX, head))


def test_recipe_names() -> None:
    assert DEFAULT_RECIPE == "subject-forai" and set(RECIPES) == {"forai", "subject-forai"}
    with pytest.raises(ValueError, match="forai, subject-forai"):
        recipe("subject")


@pytest.mark.parametrize("version", [2, 3])
def test_the_mapping_strips_the_same_prefixes(version: int) -> None:
    mapping = json.loads((MAPPINGS / f"messages-v{version}.json").read_text(encoding="utf-8"))
    patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(mapping))
    assert SUBJECT_PREFIX in [json.loads(f'"{p}"') for p in patterns]
