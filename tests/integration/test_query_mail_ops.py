"""notmuch-style operators added for search quality: ``date:``, and the v2 analysis on the
real OpenSearch node (stemmed + exact + parts, folding, addresses, subject prefixes)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from search_api.query import And, DateBound, Not, Or, QueryError, Term, parse

DAY = 86_400
JAN1 = 1_704_067_200  # 2024-01-01T00:00:00Z


def test_date_is_the_whole_utc_day() -> None:
    assert parse("date:2024-01-01") == And((DateBound(True, JAN1), DateBound(False, JAN1 + DAY)))


def test_date_range_is_inclusive_and_may_be_open() -> None:
    both = And((DateBound(True, JAN1), DateBound(False, JAN1 + 31 * DAY)))
    assert parse("date:2024-01-01..2024-01-31") == both
    assert parse("date:2024/01/01..") == DateBound(True, JAN1)
    assert parse("date:..2024-01-01") == DateBound(False, JAN1 + DAY)


def test_date_composes_with_or_and_negation() -> None:
    day = And((DateBound(True, JAN1), DateBound(False, JAN1 + DAY)))
    assert parse("x OR date:2024-01-01") == Or((Term("x"), day))
    assert parse("-date:2024-01-01") == Not(day)


@pytest.mark.parametrize("q", ["date:", "date:..", "date:2024-13-01", "date:2024-01-01..x"])
def test_bad_dates_are_query_errors(q: str) -> None:
    with pytest.raises(QueryError):
        parse(q)


@pytest.fixture
def index() -> Iterator[tuple[Any, str]]:
    from opensearchpy import OpenSearch

    from indexer.adapters.opensearch.family import MAPPING_VERSION, mapping_file
    from indexer.settings import Settings

    client = OpenSearch(hosts=[Settings().opensearch_url])
    name = f"analysis-{uuid.uuid4().hex[:8]}"
    template = mapping_file(MAPPING_VERSION)["template"]
    client.indices.create(index=name, body=template)
    try:
        yield client, name
    finally:
        client.indices.delete(index=name, ignore=[404])


def tokens(index: tuple[Any, str], field: str, text: str) -> list[str]:
    client, name = index
    found = client.indices.analyze(index=name, body={"field": field, "text": text})
    return [t["token"] for t in found["tokens"]]


@pytest.mark.stack
def test_v2_analysis_fits_mail(index: tuple[Any, str]) -> None:
    subject = "Re: Fwd: [alsa-devel] [PATCH v2] Caching accentué"
    assert tokens(index, "subject", subject) == ["cach", "accentu"]  # prefixes dropped, stemmed
    assert tokens(index, "subject.exact", subject)[:4] == ["re", "fwd", "alsa", "devel"]
    assert tokens(index, "clean.exact", "accentué") == ["accentue"]
    code = "lib/message-file.c notmuch_message_file_get_header X/Darwin"
    assert tokens(index, "clean.parts", code) == [
        *["lib", "message", "file", "c", "notmuch", "message", "file", "get", "header"],
        *["x", "darwin"],
    ]
    assert tokens(index, "from.address.parts", "KeithP@keithp.com") == ["keithp", "keithp", "com"]
    assert tokens(index, "from.name", "Nicolas de Pesloüan") == ["nicolas", "de", "peslouan"]


def test_similar_terms_are_confined_to_the_mailbox_and_name_the_source_by_id() -> None:
    from search_api.query import more_like_this as mlt

    body = mlt.terms_body(mailbox_id="m", doc_id="d1", thread_key="t",
                          terms=[("clean", "kernel"), ("subject", "mips")], size=5)
    query = body["query"]["bool"]
    assert query["filter"] == [{"term": {"mailbox_id": "m"}}]
    assert {"ids": {"values": ["d1"]}} in query["must_not"]
    assert {"term": {"thread_key": {"value": "t"}}} in query["must_not"]
    terms = query["must"][0]["bool"]
    assert terms["should"] == [{"term": {"clean": {"value": "kernel"}}},
                               {"term": {"subject": {"value": "mips"}}}]
    assert terms["minimum_should_match"] == "30%"
    own_thread = mlt.terms_body(mailbox_id="m", doc_id="d1", thread_key=None,
                                terms=[("subject", "x")], size=5)
    assert own_thread["query"]["bool"]["must_not"] == [{"ids": {"values": ["d1"]}}]
    with pytest.raises(ValueError):
        mlt.terms_body(mailbox_id="", doc_id="d1", thread_key=None, terms=[], size=5)
    with pytest.raises(ValueError):
        mlt.counts_body("", [("clean", "x")])
    counted = mlt.counts_body("m", [("clean", "kernel")])
    assert counted["query"]["bool"]["filter"] == [{"term": {"mailbox_id": "m"}}]
    assert counted["aggs"]["df"]["filters"]["filters"] == {
        "t0": {"term": {"clean": {"value": "kernel"}}}}


def test_similar_terms_are_chosen_by_counts_within_the_mailbox() -> None:
    from search_api.query import more_like_this as mlt

    tf = {("clean", "common"): 5, ("clean", "rare"): 2, ("clean", "alone"): 9,
          ("clean", "absent"): 1, ("subject", "rare"): 1}
    chosen = mlt.candidates(tf)
    assert chosen[:2] == [("clean", "alone"), ("clean", "common")] and len(chosen) == 5
    assert chosen[-1] == ("subject", "rare")  # a queue per field, as more_like_this keeps
    counts = {"hits": {"total": {"value": 100}}, "aggregations": {"df": {"buckets": {
        f"t{i}": {"doc_count": {"alone": 1, "common": 90, "rare": 3, "absent": 0}[term]}
        for i, (_, term) in enumerate(chosen)}}}}
    best = mlt.best_terms(tf, chosen, counts)
    # tf x classic idf of the mailbox's own counts; a term it lacks is never asked for
    assert best == [("clean", "alone"), ("clean", "rare"), ("clean", "common"),
                    ("subject", "rare")]
    assert mlt.best_terms(tf, chosen, counts, limit=1) == [("clean", "alone"),
                                                           ("subject", "rare")]
    assert mlt.candidates(tf, limit=1) == [("clean", "alone"), ("subject", "rare")]


def test_a_liked_analyzer_reads_only_the_source_s_body() -> None:
    from search_api.query.more_like_this import LIKED_BODY_ANALYZER, term_vectors_request

    asked = term_vectors_request("d1", ("subject", "clean"), LIKED_BODY_ANALYZER)
    assert asked["per_field_analyzer"] == {"clean": LIKED_BODY_ANALYZER}
    # the document's own counts only: the shard's statistics are another mailbox's too
    assert asked["term_statistics"] is False and asked["field_statistics"] is False
    assert "per_field_analyzer" not in term_vectors_request("d1", ("subject",),
                                                            LIKED_BODY_ANALYZER)


def test_the_current_mapping_defines_the_liked_body_analyzer() -> None:
    from indexer.adapters.opensearch.family import MAPPING_VERSION, mapping_file
    from search_api.query.more_like_this import LIKED_BODY_ANALYZER

    analysis = mapping_file(MAPPING_VERSION)["template"]["settings"]["analysis"]
    liked = analysis["analyzer"][LIKED_BODY_ANALYZER]
    body = analysis["analyzer"]["mail_text"]
    # The body's own analysis behind a limit: the same terms, only fewer of them.
    assert liked["tokenizer"] == body["tokenizer"]
    assert liked["filter"][1:] == body["filter"]
    assert analysis["filter"][liked["filter"][0]] == {"type": "limit", "max_token_count": 2000}
