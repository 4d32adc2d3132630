"""The pure parts of the vector store port: the API's filter, and Qdrant's error classes."""

from __future__ import annotations

import httpx
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.adapters.qdrant.server import classify
from indexer.core.vectors import Filter, Match, MatchAny, Range
from search_api.query import VectorFilter
from search_api.vector_search import to_filter


def _response(code: int) -> UnexpectedResponse:
    return UnexpectedResponse(code, "x", b"{}", httpx.Headers())


def test_the_api_filter_scopes_to_the_mailbox_first() -> None:
    flt = VectorFilter(
        "box",
        thread_key="t1",
        ts_gte=10,
        ts_lt=20,
        from_addresses=("a@x", "b@x"),
        exclude_thread_keys=("t2",),
        exclude_message_keys=("m1",),
    )
    assert to_filter(flt) == Filter(
        must=(Match("mailbox_id", "box"), Match("thread_key", "t1"), Range("ts", 10, 20),
              MatchAny("from", ("a@x", "b@x"))),
        must_not=(Match("thread_key", "t2"), Match("message_key", "m1")),
    )
    assert to_filter(VectorFilter("box")) == Filter(must=(Match("mailbox_id", "box"),))


def test_one_classification_of_qdrant_errors() -> None:
    assert classify(ResponseHandlingException(ConnectionError("refused"))) == "transient"
    assert classify(ConnectionRefusedError()) == "transient"
    assert classify(TimeoutError()) == "transient"
    assert [classify(_response(c)) for c in (429, 500, 503)] == ["transient"] * 3
    assert [classify(_response(c)) for c in (400, 422)] == ["poison"] * 2
    assert [classify(_response(c)) for c in (401, 403)] == ["auth"] * 2
    assert classify(_response(404)) == "unexpected"
    assert classify(ValueError("a bug")) == "unexpected"


def test_both_adapters_search_at_one_beam() -> None:
    """An approximate search walks the graph at :data:`SEARCH_EF` on either backend: left to
    Qdrant (limit x oversampling) a whale's cluster of near-copies went unfound."""
    from indexer.adapters.qdrant import edge, server
    from indexer.core.vectors import SEARCH_EF

    assert edge._search_params(exact=False).hnsw_ef == SEARCH_EF
    assert server.RESCORE.hnsw_ef == SEARCH_EF
    assert edge._search_params(exact=True).hnsw_ef is None  # exact: no graph at all
