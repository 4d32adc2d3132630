"""The query builder bounds a query's expansion before the engine is asked (issue 16)."""

from __future__ import annotations

import pytest

from indexer.core.language import ANALYZERS
from search_api.query import QueryError, build_search_body, parse
from search_api.query.clauses import in_languages
from search_api.query.expansion import (
    MAX_ENGINE_CLAUSES,
    PREFIX_EXPANSIONS,
    estimated_clauses,
    token_count,
)

CJK_256 = "".join(chr(0x4E00 + i) for i in range(256))
EMOJI_330 = "".join(chr(0x1F300 + i) for i in range(330))


def body(q: str) -> dict[str, object]:
    return build_search_body(parse(q), "mbox", size=10, sort_by_date=False)


def test_token_estimate_follows_the_standard_tokenizer() -> None:
    assert token_count("release checklist") == 2
    assert token_count("日本語のメール") == 7  # each ideograph / kana its own token
    assert token_count("🎉🎉 ok") == 3
    assert token_count("") == 0


@pytest.mark.parametrize("q", [CJK_256, EMOJI_330, "subject:" + CJK_256, "日本語 メール"])
def test_unspaced_scripts_are_one_phrase_per_field_so_long_text_fits(q: str) -> None:
    query = body(q)["query"]
    assert estimated_clauses(query) <= 13  # mailbox filter + 6 fields per word
    assert "phrase" in str(query)


def test_many_phrase_prefixes_are_refused_naming_the_limit() -> None:
    q = " OR ".join(f'"a {chr(97 + i % 26)}"*' for i in range(64))
    with pytest.raises(QueryError, match=f"at most {MAX_ENGINE_CLAUSES}"):
        body(q)


def test_a_few_prefixes_and_ordinary_queries_pass() -> None:
    assert estimated_clauses(body('"rel"* from:Mik* budget')["query"]) < MAX_ENGINE_CLAUSES
    two = estimated_clauses(body('"release n"*')["query"])
    assert two == 1 + 2 * PREFIX_EXPANSIONS  # mailbox filter + two exact fields
    # one word in quotes is a plain prefix (issue 38), costed as ``rel*`` is
    assert estimated_clauses(body('"rel"*')["query"]) == estimated_clauses(body("rel*")["query"])


def test_estimate_counts_tokens_per_field() -> None:
    words = " OR ".join(f"w{i}" for i in range(20))
    with in_languages(frozenset()):  # an English mailbox: six fields a word
        assert estimated_clauses(body(words)["query"]) == 1 + 20 * 6
    with in_languages(None):  # every language's subject and body too (mapping v7)
        assert estimated_clauses(body(words)["query"]) == 1 + 20 * (6 + 2 * len(ANALYZERS))


def test_short_prefixes_cost_what_they_expand_to() -> None:
    """64 one-letter address prefixes (issue 23: 5-14 s of highlighting on 4,000 messages
    while each counted as one clause) are refused; a real address prefix is cheap."""
    hostile = " OR ".join(f"to:{chr(97 + i % 26)}*" for i in range(64))
    with pytest.raises(QueryError, match=f"at most {MAX_ENGINE_CLAUSES}"):
        body(hostile)
    with pytest.raises(QueryError):
        body(" OR ".join(f"{chr(97 + i % 26)}*" for i in range(64)))
    assert estimated_clauses(body("from:keithp* to:linux-mips*")["query"]) < 40
    assert estimated_clauses(body("to:a*")["query"]) < MAX_ENGINE_CLAUSES


def test_the_highlight_query_counts_in_the_bound() -> None:
    """Text clauses run twice, once to match and once in the highlighter: 12 one-letter
    subject prefixes are ~600 clauses to match, ~1,200 with their snippets."""
    q = " OR ".join(f"subject:{chr(97 + i)}*" for i in range(12))
    plain = build_search_body(parse(q), "mbox", size=10, sort_by_date=False, highlight=False)
    assert estimated_clauses(plain["query"]) < MAX_ENGINE_CLAUSES
    with pytest.raises(QueryError, match=f"at most {MAX_ENGINE_CLAUSES}"):
        body(q)
