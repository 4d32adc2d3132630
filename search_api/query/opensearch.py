"""Translate a parsed query into an OpenSearch request body: plain dicts, no client.

Safety contract, asserted by the tests for every query shape:

* the top-level ``bool`` always carries ``{"term": {"mailbox_id": ...}}`` in ``filter``, so
  no query text can widen a search beyond its mailbox (negations live in ``must_not`` beside
  it, never around it);
* only structured leaf queries are emitted (``multi_match``, ``match``, ``match_phrase``,
  ``match_phrase_prefix``, ``match_bool_prefix``, ``term``, ``prefix``, ``range``, ``bool``)
  and the user's text is only ever a leaf *value*: never ``query_string`` or
  ``simple_query_string`` (their syntax would reopen the injection we parse away), never
  scripts.

The leaves are built in :mod:`.clauses`; snippets in :mod:`.highlight`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from search_api.query.ast import And, Node, Term
from search_api.query.clauses import MAILBOX_FIELD, clause, conjunction
from search_api.query.expansion import check_expansion
from search_api.query.highlight import highlight_spec

Query = dict[str, Any]

__all__ = ["MAILBOX_FIELD", "build_query", "build_search_body", "collapse_spec", "sort_spec"]

# Counting every hit costs a full pass; "1000+" is all a mail client shows anyway.
TOTAL_HITS_CAP = 1000
MAX_PAGE_SIZE = 1000  # engine page; the API caps `limit` at 100 and asks for one more
# OpenSearch's default index.max_result_window: from + size beyond it is rejected.
MAX_RESULT_WINDOW = 10_000
# The minimum_should_match forms the relaxed full-text leg may use (a count, a share, or both).
_MIN_SHOULD = re.compile(r"(?:[1-9]\d*<)?-?\d+%?")

_RELEVANCE_SORT: list[Query] = [
    {"_score": {"order": "desc"}},
    {"ts": {"order": "desc", "missing": "_last"}},
    {"message_key": {"order": "asc"}},
]
_DATE_SORT: list[Query] = [
    {"ts": {"order": "desc", "missing": "_last"}},
    {"message_key": {"order": "asc"}},
]


# What a hit is read for (search_api.candidates); the page's rows come from DynamoDB. Not the
# body: hybrid's 100 candidates carried up to 100 bodies of up to 400 KB each, unread.
HIT_FIELDS = ("message_key", "thread_key", "ts")


def _relaxed(nodes: Sequence[Node], any_words: str) -> list[Node | Query]:
    """The top-level nodes with their bare words made one clause: any ``any_words`` of them
    (an OpenSearch ``minimum_should_match``), each word scored as in the strict query."""
    words = [n for n in nodes if isinstance(n, Term)]
    if len(words) < 2:
        return list(nodes)
    loose = {"bool": {"should": [clause(w) for w in words], "minimum_should_match": any_words}}
    return [*(n for n in nodes if not isinstance(n, Term)), loose]


def build_query(node: Node, mailbox_id: str, *, any_words: str | None = None) -> Query:
    """The ``query`` of a search in one mailbox: a ``bool`` whose filter pins the mailbox.

    ``any_words`` (hybrid search's full-text leg only): the bare words of the top level need
    not all match, only that many of them (``minimum_should_match``, e.g. ``"1"`` or ``"30%"``);
    every operator, phrase, group and negation still holds exactly. None: all words (notmuch).
    """
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    if any_words is not None and not _MIN_SHOULD.fullmatch(any_words):
        raise ValueError(f"any_words {any_words!r} is not a minimum_should_match (N, N%, N<M%)")
    top = node.nodes if isinstance(node, And) else (node,)
    body = conjunction(_relaxed(top, any_words) if any_words is not None else top)
    body["filter"] = [{"term": {MAILBOX_FIELD: mailbox_id}}, *body.get("filter", [])]
    return {"bool": body}


def collapse_spec() -> Query:
    """One hit per thread (``collapse=thread``), with the thread's number of matches.

    OpenSearch 2.19 expands each collapsed hit with one extra search per group (in
    parallel): ``inner_hits.thread_hits.hits.total.value`` is how many messages of that
    thread match, and its single hit (no ``_source``) the newest of them. Size 1 rather
    than 0 keeps clear of version-specific handling of empty inner hits, at the cost of one
    id per group. The group search reuses the full query, so it is mailbox-confined too.
    Limits of 2.19: ``search_after`` cannot be combined with ``collapse`` (only from 3.3),
    so collapsed pages use ``from`` (``offset``); messages without a ``thread_key`` would
    collapse into one group (the indexer always sets one).
    """
    return {
        "field": "thread_key",
        "inner_hits": {
            "name": "thread_hits",
            "size": 1,
            "_source": False,
            "sort": [{"ts": {"order": "desc", "missing": "_last"}}],
        },
    }


def sort_spec(*, sort_by_date: bool) -> list[Query]:
    """Total order for stable paging: ``message_key`` breaks ties (unique in a mailbox)."""
    return copy.deepcopy(_DATE_SORT if sort_by_date else _RELEVANCE_SORT)


def build_search_body(
    node: Node,
    mailbox_id: str,
    *,
    size: int,
    sort_by_date: bool,
    search_after: Sequence[str | int | float] | None = None,
    collapse_threads: bool = False,
    offset: int = 0,
    any_words: str | None = None,
    highlight: bool = True,
) -> Query:
    """The full ``_search`` body. ``search_after`` is the previous page's last ``sort``;
    ``any_words``: see :func:`build_query` (hybrid's relaxed full-text leg); ``highlight``:
    snippets of these hits (only for a page shown as is: a candidate list is not).

    Raises :class:`QueryError` when the query would expand past the engine's clause limit
    (see ``expansion``), and ``ValueError`` for a page the engine would reject: size outside
    1..``MAX_PAGE_SIZE``, a cursor not shaped like the sort, a cursor with ``collapse``
    (unsupported before OpenSearch 3.3) or with ``offset``, or ``offset + size`` beyond
    ``MAX_RESULT_WINDOW``.
    """
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise ValueError(f"size must be between 1 and {MAX_PAGE_SIZE}")
    if not 0 <= offset <= MAX_RESULT_WINDOW - size:
        raise ValueError(f"offset + size must stay within {MAX_RESULT_WINDOW}")
    query = build_query(node, mailbox_id, any_words=any_words)
    sort = sort_spec(sort_by_date=sort_by_date)
    body: Query = {"query": query, "size": size, "sort": sort, "track_total_hits": TOTAL_HITS_CAP,
                   "_source": list(HIT_FIELDS)}
    if highlight:
        body["highlight"] = highlight_spec(node)
    # The highlighter's query is run too (over every fetched hit): it counts in the bound.
    check_expansion([query, body.get("highlight", {}).get("highlight_query", {})])
    if search_after is not None:
        if collapse_threads or offset:
            raise ValueError("search_after cannot be combined with collapse or offset")
        if len(search_after) != len(sort):
            raise ValueError(f"search_after needs {len(sort)} values, one per sort key")
        body["search_after"] = list(search_after)
    if offset:
        body["from"] = offset
    if collapse_threads:
        body["collapse"] = collapse_spec()
    return body
