"""The pure parts of contacts and "did you mean": the prefix as a literal of the engine's
regular expressions, folding, name matching, edit distances and the query rewrite."""

from __future__ import annotations

import re

import pytest

from search_api import contacts, suggest
from search_api.query import parse


@pytest.mark.parametrize("hostile", [".*", "a|b", "[", "\\", 'a"b', "(", "a{1,9}", "~@#&<>"])
def test_a_prefix_is_a_literal_of_the_include_pattern(hostile: str) -> None:
    pattern = contacts.include_pattern(hostile)
    # Python's syntax agrees with Lucene's here (a backslash makes any character literal):
    # the pattern admits the text itself as a prefix, and nothing its operators would.
    assert re.fullmatch(pattern, hostile + "x")
    assert not re.fullmatch(pattern, "zz" + hostile) and not re.fullmatch(pattern, "b")


def test_include_pattern_admits_address_domain_and_label_prefixes() -> None:
    pattern = re.compile(contacts.include_pattern("git"))
    for admitted in ("gitster@x.org", "noreply@github.com", "a@lists.gitlab.example"):
        assert pattern.fullmatch(admitted), admitted
    for refused in ("x@hubgit.com", "legit@x.org", "a@b.cgit"):
        assert not pattern.fullmatch(refused), refused


def test_fold_and_name_matching() -> None:
    assert contacts.fold("Renée LEFÈVRE") == "renee lefevre"
    assert contacts.name_matches("Renée Lefèvre", ["lef"])
    assert contacts.name_matches("Ralf Baechle", ["ralf", "baech"])
    assert not contacts.name_matches("Ralf Baechle", ["ralf", "chen"])
    assert not contacts.name_matches(None, ["ralf"])


def test_edits_count_a_swap_as_one() -> None:
    assert suggest.edits("recieve", "receive") == 1
    assert suggest.edits("treers", "trees") == 1
    assert suggest.edits("kernal", "kernel") == 1
    assert suggest.edits("lisbonn", "lisbon") == 1
    assert suggest.edits("abc", "xyz") == 3
    assert suggest._swapped("terms", "trems") and not suggest._swapped("trees", "trems")
    assert [suggest.allowed_edits(w) for w in ("ab", "abc", "abcde", "abcdef")] == [0, 1, 1, 2]


def test_only_free_words_are_corrected_case_kept() -> None:
    q = 'Kernal from:kernal "kernal" -kernal kernal'
    assert suggest._replaced(q, {"kernal": "kernel"}) == (
        'Kernel from:kernal "kernel" -kernel kernel')
    parse(suggest._replaced(q, {"kernal": "kernel"}))  # still a query


def test_what_is_never_corrected() -> None:
    for word in ("abc", "x86", "lib/file.c", "foo_bar", "日本語の"):
        assert not suggest._spellable(word), word
    assert suggest._spellable("Réunion") and suggest._spellable("kernal")
