"""The search service's own rules that need no engine (issue 23 part 3): a malformed hot row
is rendered without its bad field, and hybrid refuses an over-limit query before embedding."""

from __future__ import annotations

import pytest

from indexer.metrics import MALFORMED_FIELDS
from indexer.settings import Settings
from search_api import hits, service
from search_api.backends import Backends
from search_api.candidates import Candidate
from search_api.encoding import ReadTarget
from search_api.limits import ExpensiveGate, TooManyExpensive, is_expensive
from search_api.query import QueryError, parse
from search_api.query.clauses import in_languages

ROW = {"message_id": "<m@x>", "subject": "s", "ts": 1700000000, "size_bytes": "x",
       "attachment_count": None, "clean_fallback": 0}


def test_a_malformed_number_is_shown_as_null_and_counted() -> None:
    before = MALFORMED_FIELDS.labels(field="size_bytes")._value.get()
    hit = hits.render(Candidate("k", "t", 1, 1.0), ROW, "fulltext")
    assert hit["size_bytes"] is None and hit["ts"] == 1700000000
    assert MALFORMED_FIELDS.labels(field="size_bytes")._value.get() == before + 1


class NoEmbedding(Backends):
    """The API's own Backends, whose query encoder must not be reached."""

    def embed_query(self, text: str, target: ReadTarget) -> list[float]:
        raise AssertionError(f"embedded {text!r} before the query was checked")


def test_hybrid_refuses_an_over_limit_query_before_embedding_it() -> None:
    backends = NoEmbedding(Settings())
    hostile = parse(" OR ".join(f"to:{chr(97 + i % 26)}*" for i in range(64)))
    try:
        with pytest.raises(QueryError, match="at most"):
            service.hybrid(backends, "mbox", hostile)
    finally:
        backends.close()


def test_only_costly_queries_are_expensive() -> None:
    assert not is_expensive(parse("budget review from:alice"))
    assert is_expensive(parse(" OR ".join(f"to:{c}bc*" for c in "abcdefghijklmnop")))


def test_a_caller_starts_at_most_its_rate_of_expensive_searches() -> None:
    gate = ExpensiveGate(4, per_second=1.0)
    for _ in range(2):  # the burst
        with gate.admit("a", True):
            pass
    with pytest.raises(TooManyExpensive, match="retry after 1 s"), gate.admit("a", True):
        pass
    with gate.admit("b", True), gate.admit("a", False):
        pass


def test_a_caller_runs_at_most_its_share_of_expensive_searches() -> None:
    gate = ExpensiveGate(1, per_second=100.0)
    with gate.admit("a", True):
        with pytest.raises(TooManyExpensive), gate.admit("a", True):
            pass
        with gate.admit("b", True), gate.admit("a", False):  # others, cheap ones: admitted
            pass
    with gate.admit("a", True):  # released
        pass




def test_the_process_runs_at_most_its_cap_of_expensive_searches_from_all_callers() -> None:
    gate = ExpensiveGate(2, per_second=100.0, in_flight=2)
    with gate.admit("a", True), gate.admit("b", True):
        with pytest.raises(TooManyExpensive, match="SIDECAR_API_EXPENSIVE_IN_FLIGHT"), \
                gate.admit("c", True):
            pass
        with gate.admit("c", False):  # a cheap one is never held back by the cap
            pass
    with gate.admit("c", True):
        pass


def test_collapse_is_weighed_by_the_groups_it_re_runs_the_query_for() -> None:
    words = parse(" OR ".join(f"word{i}" for i in range(16)))
    with in_languages(frozenset()):  # a mailbox whose mail is English: as before mapping v7
        assert not is_expensive(words, limit=100)
        assert is_expensive(words, collapse=True, limit=100)
        assert not is_expensive(parse("budget review"), collapse=True, limit=20)
    with in_languages(frozenset({"de"})):  # German mail too: each word 2 clauses more
        assert not is_expensive(parse(" OR ".join(f"w{i}" for i in range(12))), limit=100)
        assert is_expensive(words, limit=100)


def test_the_principal_is_the_credential_after_parsing_or_a_jwt_s_subject() -> None:
    import jwt as pyjwt

    from search_api.limits import principal_key

    assert principal_key("T") == principal_key(" T") == principal_key("T ")
    assert principal_key("T") != principal_key("U")
    assert principal_key("T").startswith("token:") and "T" not in principal_key("T")[6:7]
    one = pyjwt.encode({"iss": "https://idp", "sub": "u1", "n": 1}, "k" * 32, "HS256")
    two = pyjwt.encode({"iss": "https://idp", "sub": "u1", "n": 2}, "k" * 32, "HS256")
    other = pyjwt.encode({"iss": "https://idp", "sub": "u2"}, "k" * 32, "HS256")
    assert principal_key(one) == principal_key(two) != principal_key(other)
    assert principal_key(one).startswith("jwt:")


def test_every_request_of_a_caller_counts_against_its_rate() -> None:
    from search_api.limits import RequestRate

    rate = RequestRate(per_second=2.0)
    for _ in range(4):  # the burst: twice the rate
        rate.admit("a")
    with pytest.raises(TooManyExpensive, match="SIDECAR_API_REQUESTS_PER_SECOND"):
        rate.admit("a")
    rate.admit("b")
