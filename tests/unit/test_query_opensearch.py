"""Parsed queries to OpenSearch bodies: field mapping, mailbox isolation, no injectable DSL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexer.core.language import ANALYZERS
from search_api.query import (
    QueryError,
    Term,
    build_query,
    build_search_body,
    collapse_spec,
    highlight_spec,
    page_highlight_body,
    parse,
)

MB = "mbx-1"
KEY = "ab" * 32
MAILBOX_TERM = {"term": {"mailbox_id": MB}}
ALLOWED_LEAVES = {
    "multi_match",
    "match",
    "match_phrase",
    "match_phrase_prefix",
    "match_bool_prefix",
    "term",
    "prefix",
    "range",
    "bool",
}
# mapping v7: each language's subject and body after the English analyses
LANGUAGES = [f for c in ANALYZERS for f in (f"subject_{c}^3", f"clean_{c}")]
TEXT = ["subject^3", "clean", "subject.exact^3", "clean.exact", "subject.parts^3", "clean.parts",
        *LANGUAGES]
EXACT = ["subject.exact^3", "clean.exact"]


def walk(value: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a nested JSON structure."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield key, child
            yield from walk(child)
    elif isinstance(value, list):
        for child in value:
            yield from walk(child)


def query_types(clause: dict[str, Any]) -> Iterator[str]:
    """The query type of every clause in a bool tree."""
    ((kind, body),) = clause.items()
    yield kind
    if kind == "bool":
        for occur in ("must", "should", "filter", "must_not"):
            for child in body.get(occur, []):
                yield from query_types(child)


def assert_safe(query: dict[str, Any], mailbox_id: str = MB) -> None:
    json.dumps(query)
    assert set(query) == {"bool"}
    assert query["bool"]["filter"][0] == {"term": {"mailbox_id": mailbox_id}}
    assert not set(query["bool"]) - {"filter", "must", "must_not"}
    keys = {key for key, _ in walk(query)}
    assert not keys & {
        "query_string",
        "simple_query_string",
        "script",
        "script_score",
        "wrapper",
        "match_all",
        "regexp",
        "wildcard",
        "fuzzy",
    }
    assert set(query_types(query)) <= ALLOWED_LEAVES


def q(text: str) -> dict[str, Any]:
    """build_query of ``text``, checked for isolation and safety (every test goes through it)."""
    query = build_query(parse(text), MB)
    assert_safe(query)
    return query


def only(text: str) -> dict[str, Any]:
    """The single clause a one-leaf query puts next to the mailbox filter."""
    body = q(text)["bool"]
    assert "must_not" not in body
    clauses = body["filter"][1:] + body.get("must", [])
    assert len(clauses) == 1
    return clauses[0]  # type: ignore[no-any-return]


def any_of(*clauses: dict[str, Any]) -> dict[str, Any]:
    return {"bool": {"should": list(clauses), "minimum_should_match": 1}}


# --- leaves -------------------------------------------------------------------------------


def test_free_term_queries_stemmed_and_exact_fields_with_and() -> None:
    assert only("Meetings") == {
        "multi_match": {
            "query": "Meetings",
            "type": "best_fields",
            "fields": TEXT,
            "operator": "and",
        }
    }


def test_phrase_queries_exact_fields() -> None:
    assert only('"Release Notes"') == {
        "multi_match": {"query": "Release Notes", "type": "phrase", "fields": EXACT}
    }
    assert only('"release no"*') == {
        "multi_match": {"query": "release no", "type": "phrase_prefix", "fields": EXACT}
    }


def test_prefix_term_is_a_lowercased_bool_prefix_on_exact_fields() -> None:
    assert only("FreeB*") == {
        "multi_match": {"query": "freeb", "type": "bool_prefix", "fields": EXACT, "operator": "and"}
    }


def test_from_matches_address_parts_or_name() -> None:
    assert only("from:KeithP@keithp.com") == any_of(
        {"term": {"from.address": {"value": "keithp@keithp.com"}}},
        {"match_phrase": {"from.address.parts": {"query": "KeithP@keithp.com"}}},
        {"match": {"from.name": {"query": "KeithP@keithp.com", "operator": "and"}}},
    )


def _recipient(keyword: str, names: str) -> list[dict[str, Any]]:
    return [
        {"term": {keyword: {"value": "keithp.com"}}},
        {"match_phrase": {f"{keyword}.parts": {"query": "keithp.com"}}},
        {"match": {names: {"query": "keithp.com", "operator": "and"}}},
    ]


def test_cc_uses_its_fields_and_to_covers_cc_too() -> None:
    assert only("cc:keithp.com") == any_of(*_recipient("cc", "cc_names"))
    # notmuch's to: matches any recipient, Cc included
    assert only("to:keithp.com") == any_of(
        *_recipient("to", "to_names"), *_recipient("cc", "cc_names")
    )


def test_address_phrase_and_prefixes() -> None:
    assert only('from:"Keith Packard"') == any_of(
        {"term": {"from.address": {"value": "keith packard"}}},
        {"match_phrase": {"from.address.parts": {"query": "Keith Packard"}}},
        {"match_phrase": {"from.name": {"query": "Keith Packard"}}},
    )
    assert only("from:Mik*") == any_of(
        {"prefix": {"from.address": {"value": "mik"}}},
        {"match_bool_prefix": {"from.address.parts": {"query": "mik", "operator": "and"}}},
        {"match_bool_prefix": {"from.name": {"query": "mik", "operator": "and"}}},
    )
    assert only('cc:"Keith P"*') == any_of(
        {"prefix": {"cc": {"value": "keith p"}}},
        {"match_bool_prefix": {"cc.parts": {"query": "keith p", "operator": "and"}}},
        {"match_phrase_prefix": {"cc_names": {"query": "Keith P"}}},
    )


def test_subject_variants() -> None:
    # stemmed subject (no Re:/[tag] prefixes) or the exact one (prefixes kept: subject:PATCH)
    assert only("subject:Meeting") == {
        "multi_match": {
            "query": "Meeting",
            "fields": ["subject", "subject.exact", "subject.parts",
                       *(f"subject_{c}" for c in ANALYZERS)],
            "operator": "and",
        }
    }
    assert only('subject:"weekly sync"') == {
        "match_phrase": {"subject.exact": {"query": "weekly sync"}}
    }
    assert only("subject:FreeB*") == {
        "match_bool_prefix": {"subject.exact": {"query": "freeb", "operator": "and"}}
    }
    assert only('subject:"free b"*') == {
        "match_phrase_prefix": {"subject.exact": {"query": "free b"}}
    }


def test_structured_operators_are_filters() -> None:
    assert only(f"thread:{KEY.upper()}") == {"term": {"thread_key": {"value": KEY}}}
    assert only("has:attachment") == {"range": {"attachment_count": {"gte": 1}}}
    assert only("after:2024/01/31") == {
        "range": {"ts": {"gte": 1706659200, "format": "epoch_second"}}
    }
    assert only("before:2024-01-31") == {
        "range": {"ts": {"lt": 1706745600, "format": "epoch_second"}}
    }


# --- boolean structure --------------------------------------------------------------------


def test_top_level_and_splits_into_must_filter_must_not() -> None:
    query = q(f"budget -draft thread:{KEY} after:2024-01-31")
    bool_ = query["bool"]
    assert bool_["filter"] == [
        MAILBOX_TERM,
        {"term": {"thread_key": {"value": KEY}}},
        {"range": {"ts": {"gte": 1706659200, "format": "epoch_second"}}},
    ]
    assert [c["multi_match"]["query"] for c in bool_["must"]] == ["budget"]
    assert [c["multi_match"]["query"] for c in bool_["must_not"]] == ["draft"]


def test_precedence_reaches_the_engine() -> None:
    bool_ = q("a b OR c")["bool"]
    assert bool_["must"][0]["multi_match"]["query"] == "a"
    should = bool_["must"][1]["bool"]["should"]
    assert [c["multi_match"]["query"] for c in should] == ["b", "c"]
    assert bool_["must"][1]["bool"]["minimum_should_match"] == 1


def test_nested_negation_and_groups() -> None:
    clause = only("a OR -(b c)")
    first, second = clause["bool"]["should"]
    assert first["multi_match"]["query"] == "a"
    inner = second["bool"]["must_not"][0]["bool"]["must"]
    assert [c["multi_match"]["query"] for c in inner] == ["b", "c"]


def test_pure_negation_keeps_the_mailbox_filter() -> None:
    assert q("-spam") == {
        "bool": {
            "filter": [MAILBOX_TERM],
            "must_not": [
                {
                    "multi_match": {
                        "query": "spam",
                        "type": "best_fields",
                        "fields": TEXT,
                        "operator": "and",
                    }
                }
            ],
        }
    }


def test_missing_mailbox_is_refused() -> None:
    with pytest.raises(ValueError):
        build_query(Term("a"), "")


# --- hostile input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "*:*",
        '{"query":{"match_all":{}}}',
        "mailbox_id:other",
        "accentué 😀",
        "a\u0000b",
        'mailbox_id:"x" OR "y"',
        "_source:* OR *",
        "script:doc",
        "query_string:x",
    ],
)
def test_hostile_text_stays_a_leaf_value(text: str) -> None:
    query = q(text)
    assert query["bool"]["filter"] == [MAILBOX_TERM]  # nothing filters by the user's "mailbox"
    assert all(isinstance(v, str) for k, v in walk(query) if k == "query")


@pytest.mark.parametrize("text", ["*:*", "{query:{}}"])
def test_operator_lookalikes_are_searched_as_text(text: str) -> None:
    assert only(text) == {
        "multi_match": {"query": text, "type": "best_fields", "fields": TEXT, "operator": "and"}
    }


PARTS = ["subject.parts^3", "clean.parts"]


@pytest.mark.parametrize(
    "text", ["mailbox_id:other", "foo:bar", "_id:1", "lib/message-file.c", "notmuch_message_file"]
)
def test_joined_words_are_a_phrase_of_their_parts(text: str) -> None:
    """Letters joined by punctuation: a phrase (Xapian's phrase generators) as typed or of
    the parts inside a longer identifier or path; still only a leaf value."""
    assert only(text) == {"multi_match": {"query": text, "type": "phrase", "fields": EXACT + PARTS}}


def test_hostile_mailbox_id_is_only_a_term_value() -> None:
    hostile = '"} OR {"match_all": {}}'
    assert_safe(build_query(parse("a"), hostile), hostile)


@pytest.mark.parametrize("text", [") OR (", "a" * 2000, "\u0000"])
def test_unparseable_hostile_text_is_a_query_error(text: str) -> None:
    with pytest.raises(QueryError):
        parse(text)


# --- request body -------------------------------------------------------------------------


def test_relevance_body() -> None:
    body = build_search_body(parse("budget"), MB, size=20, sort_by_date=False, search_after=None)
    assert_safe(body["query"])
    assert body["size"] == 20
    assert body["sort"] == [
        {"_score": {"order": "desc"}},
        {"ts": {"order": "desc", "missing": "_last"}},
        {"message_key": {"order": "asc"}},
    ]
    assert body["track_total_hits"] == 1000
    assert body["highlight"] == highlight_spec(parse("budget"))
    assert "search_after" not in body and "collapse" not in body and "from" not in body
    # Only what a hit is read for: never the body (hybrid fetches 100 candidates).
    assert body["_source"] == ["message_key", "thread_key", "ts"]
    # The highlighter reads a bounded prefix of each field, whatever its size.
    assert body["highlight"]["max_analyzer_offset"] == 20_000


def test_date_body_with_cursor() -> None:
    body = build_search_body(
        parse("a"), MB, size=5, sort_by_date=True, search_after=[1706659200000, "k1"]
    )
    assert body["sort"] == [
        {"ts": {"order": "desc", "missing": "_last"}},
        {"message_key": {"order": "asc"}},
    ]
    assert body["search_after"] == [1706659200000, "k1"]
    json.dumps(body)


def test_sort_is_not_shared_between_bodies() -> None:
    first = build_search_body(parse("a"), MB, size=5, sort_by_date=True)
    first["sort"][0]["ts"]["order"] = "asc"
    assert (
        build_search_body(parse("a"), MB, size=5, sort_by_date=True)["sort"][0]["ts"]["order"]
        == "desc"
    )


def test_collapsed_body_pages_with_offset() -> None:
    body = build_search_body(
        parse("a"), MB, size=10, sort_by_date=False, collapse_threads=True, offset=20
    )
    assert body["collapse"] == collapse_spec()
    assert body["collapse"]["field"] == "thread_key"
    assert body["collapse"]["inner_hits"]["name"] == "thread_hits"
    assert body["from"] == 20


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 0},
        {"size": 1001},
        {"size": 10, "search_after": [1, "k"]},  # relevance sort needs 3 values
        {"size": 10, "search_after": [1, 2, "k"], "collapse_threads": True},
        {"size": 10, "search_after": [1, 2, "k"], "offset": 10},
        {"size": 10, "offset": 9995},
        {"size": 10, "offset": -1},
    ],
)
def test_bad_pages_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        build_search_body(parse("a"), MB, sort_by_date=False, **kwargs)


def test_highlight_spec() -> None:
    spec = highlight_spec(parse("budget"))
    assert spec["encoder"] == "html"
    assert set(spec["fields"]) >= {"subject", "clean", "subject.exact", "clean.exact"}
    assert spec["fragment_size"] == 150 and spec["number_of_fragments"] == 2
    assert spec["require_field_match"] is True


def test_highlight_query_holds_only_text_and_subject_clauses() -> None:
    """Addresses, dates and negations never reach the highlighter (each of its clauses runs
    over every token of every fetched hit)."""
    node = parse("to:a* OR from:b* budget subject:plan -draft after:2024-01-01 has:attachment")
    query = highlight_spec(node)["highlight_query"]
    text = str(query)
    assert "budget" in text and "plan" in text
    assert "draft" not in text and "'to'" not in text and "from" not in text
    assert "range" not in text
    assert highlight_spec(parse("from:alice"))["highlight_query"] == {"match_none": {}}


def test_candidate_lists_are_not_highlighted() -> None:
    body = build_search_body(parse("budget"), MB, size=100, sort_by_date=False, highlight=False)
    assert "highlight" not in body


def test_page_highlight_body_is_confined_to_the_page_and_the_mailbox() -> None:
    body = page_highlight_body(parse("budget"), MB, ["k1", "k2"])
    assert body["query"]["bool"]["filter"] == [
        {"term": {"mailbox_id": MB}},
        {"terms": {"message_key": ["k1", "k2"]}},
    ]
    assert body["size"] == 2 and body["highlight"]["highlight_query"]


# --- properties ---------------------------------------------------------------------------

WORDS = st.sampled_from(
    [
        "a",
        "Mik*",
        '"x y"',
        "OR",
        "AND",
        "-",
        "(",
        ")",
        "from:",
        "to:a@b.c",
        "cc:x",
        "subject:",
        "thread:" + KEY,
        "after:2024-01-31",
        "before:2024/02/01",
        "has:attachment",
        "*:*",
        "mailbox_id:x",
        "{",
        "}",
        '"',
        "é",
        "😀",
        "\u0000",
        "query_string",
        "script",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(WORDS, max_size=40).map(" ".join)))
def test_every_parsed_query_is_confined_and_safe(text: str) -> None:
    try:
        node = parse(text)
    except QueryError:
        return
    assert_safe(build_query(node, MB))
    body = build_search_body(node, MB, size=10, sort_by_date=False, collapse_threads=True)
    json.dumps(body)
    assert body["query"]["bool"]["filter"][0] == MAILBOX_TERM


# --- hybrid's relaxed full-text leg -------------------------------------------------------


def word(text: str) -> dict[str, Any]:
    """The strict clause of one bare word (what each word of the relaxed leg keeps)."""
    return only(text)


def test_relaxed_leg_ors_the_bare_words_and_keeps_every_operator_exact() -> None:
    text = 'cache flush from:ralf "hazard barrier" -draft after:2024-01-31 (a OR b) R10000'
    query = build_query(parse(text), MB, any_words="30%")
    assert_safe(query)
    strict = q(text)["bool"]
    body = query["bool"]
    loose = {"bool": {"should": [word("cache"), word("flush"), word("R10000")],
                      "minimum_should_match": "30%"}}
    # every other clause exactly as in the strict query; the words are one "some of" clause
    assert body["filter"] == strict["filter"] and body["must_not"] == strict["must_not"]
    assert body["must"] == [c for c in strict["must"] if c not in loose["bool"]["should"]] + [
        loose
    ]
    assert len(strict["must"]) == 6 and len(body["must"]) == 4


@pytest.mark.parametrize("text", ["cache", "from:ralf", "cache from:ralf", "a OR b c", "-x y"])
def test_one_word_or_none_is_the_strict_query(text: str) -> None:
    """Nothing to relax with fewer than two bare words; nested words are never relaxed."""
    relaxed = build_query(parse(text), MB, any_words="1")
    assert relaxed == q(text)


def test_full_text_mode_keeps_and() -> None:
    body = build_search_body(parse("cache flush"), MB, size=10, sort_by_date=False)
    assert [c["multi_match"]["operator"] for c in body["query"]["bool"]["must"]] == ["and"] * 2


@pytest.mark.parametrize("bad", ["", "x", "1;drop", "50%%", "<2", "1 OR 2"])
def test_a_malformed_minimum_should_match_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="minimum_should_match"):
        build_query(parse("a b"), MB, any_words=bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=30).map(" ".join))
def test_every_relaxed_query_is_confined_and_safe(text: str) -> None:
    try:
        node = parse(text)
    except QueryError:
        return
    assert_safe(build_query(node, MB, any_words="2<40%"))


def test_words_are_weighed_by_their_rarity_in_the_mailbox() -> None:
    """The statistics request is confined to the mailbox and names no user text as a key;
    the rarer word weighs more in the built query."""
    from search_api.query.weights import stats_body, weighted, weights_from

    node = parse("ingenic timer -draft rel*")
    body = stats_body(node, MB)
    assert body is not None and body["size"] == 0
    assert body["query"]["bool"]["filter"] == [{"term": {"mailbox_id": MB}}]
    assert set(body["aggs"]["df"]["filters"]["filters"]) == {"w0", "w1"}  # no prefix, no -draft
    answer = {"df": {"buckets": {"w0": {"doc_count": 3}, "w1": {"doc_count": 80}}}}
    weights = weights_from(node, 100, answer)
    assert weights["ingenic"] > weights["timer"] > 0
    text = json.dumps(build_query(weighted(node, weights), MB))
    assert f'"boost": {round(weights["ingenic"], 4)}' in text
    assert stats_body(parse("ingenic"), MB) is None  # one word cannot change the order
