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

Field choice follows ``mappings/messages-v2.json``: ``subject``/``clean`` are stemmed
(recall; the stemmed subject also drops ``Re:``/``Fwd:``/``[list-tag]`` prefixes so they do
not weigh on relevance), their ``.exact`` sub-fields are only lowercased and folded
(phrases, prefixes, exact words, the prefixes included), and their ``.parts`` sub-fields
split on every non-alphanumeric: a word joined by punctuation (``lib/message-file.c``,
``notmuch_message_file_get_header``) is searched as a phrase of its parts, as Xapian's
phrase generators do for notmuch, so it also matches inside a longer path or identifier.
Address keywords are lowercased by a normalizer and their ``.parts`` split on
non-alphanumerics so an address, its local part or its domain match; ``to:`` searches the Cc
recipients too (as notmuch's ``to:`` does).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any, assert_never

from search_api.query.ast import (
    And,
    DateBound,
    Field,
    HasAttachment,
    Node,
    Not,
    Or,
    Phrase,
    Term,
    Thread,
)
from search_api.query.expansion import check_expansion, is_unspaced

Query = dict[str, Any]

MAILBOX_FIELD = "mailbox_id"
# Counting every hit costs a full pass; "1000+" is all a mail client shows anyway.
TOTAL_HITS_CAP = 1000
MAX_PAGE_SIZE = 1000  # engine page; the API caps `limit` at 100 and asks for one more
# OpenSearch's default index.max_result_window: from + size beyond it is rejected.
MAX_RESULT_WINDOW = 10_000

_TEXT_FIELDS = (
    "subject^3",
    "clean",
    "subject.exact^3",
    "clean.exact",
    "subject.parts^3",
    "clean.parts",
)
_EXACT_FIELDS = ("subject.exact^3", "clean.exact")
_PARTS_FIELDS = ("subject.parts^3", "clean.parts")
_SUBJECT_FIELDS = ("subject", "subject.exact", "subject.parts")
# A word with punctuation between letters or digits: its parts are searched as a phrase too.
_JOINED = re.compile(r"[^\W_][^\w\s]+[^\W_]|[^\W_]_+[^\W_]")
# operator -> (lowercased keyword field with a ``.parts`` sub-field, display-name field)
_ADDRESS_FIELDS = {
    "from": ("from.address", "from.name"),
    "to": ("to", "to_names"),
    "cc": ("cc", "cc_names"),
}
# notmuch's ``to:`` matches any recipient: To and Cc.
_ADDRESS_GROUPS = {"from": ("from",), "to": ("to", "cc"), "cc": ("cc",)}
# The minimum_should_match forms the relaxed full-text leg may use (a count, a share, or both).
_MIN_SHOULD = re.compile(r"(?:[1-9]\d*<)?-?\d+%?")
# Yes/no constraints: filter context (cached, unscored) when they are ANDed.
_FILTER_NODES = (DateBound, Thread, HasAttachment)

_RELEVANCE_SORT: list[Query] = [
    {"_score": {"order": "desc"}},
    {"ts": {"order": "desc", "missing": "_last"}},
    {"message_key": {"order": "asc"}},
]
_DATE_SORT: list[Query] = [
    {"ts": {"order": "desc", "missing": "_last"}},
    {"message_key": {"order": "asc"}},
]


def _any_of(clauses: list[Query]) -> Query:
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _term_query(node: Term) -> Query:
    if node.prefix:
        # bool_prefix analyses the stem like the indexed text (folding included) and makes
        # only its last token a prefix, expanded to a bounded number of terms.
        return {
            "multi_match": {
                "query": node.text.lower(),
                "type": "bool_prefix",
                "fields": list(_EXACT_FIELDS),
                "operator": "and",
            }
        }
    if _has_unspaced(node.text):
        # CJK / kana / emoji: one token per character (a bigram with mapping v3), so the
        # word is a phrase of them — one clause per field however long the text is.
        fields = list(_TEXT_FIELDS)
        return {"multi_match": {"query": node.text, "type": "phrase", "fields": fields}}
    if _JOINED.search(node.text):
        # Xapian's phrase generators: letters joined by punctuation are a phrase of their
        # parts, matched as typed (exact fields) or inside a longer identifier or path
        # (``.parts``: ``fscache_release_page`` finds ``cifs_fscache_release_page``).
        fields = [*_EXACT_FIELDS, *_PARTS_FIELDS]
        return {"multi_match": {"query": node.text, "type": "phrase", "fields": fields}}
    return {
        "multi_match": {
            "query": node.text,
            "type": "best_fields",
            "fields": list(_TEXT_FIELDS),
            "operator": "and",
        }
    }


def _has_unspaced(text: str) -> bool:
    return any(is_unspaced(char) for char in text)


def _phrase_query(node: Phrase) -> Query:
    kind = "phrase_prefix" if node.prefix else "phrase"
    return {"multi_match": {"query": node.text, "type": kind, "fields": list(_EXACT_FIELDS)}}


def _subject_query(node: Field) -> Query:
    if node.phrase and node.prefix:
        return {"match_phrase_prefix": {"subject.exact": {"query": node.value}}}
    if node.prefix:
        query = {"query": node.value.lower(), "operator": "and"}
        return {"match_bool_prefix": {"subject.exact": query}}
    if node.phrase or _has_unspaced(node.value):
        return {"match_phrase": {"subject.exact": {"query": node.value}}}
    # The stemmed subject lacks the Re:/[tag] prefixes; the exact one still has them.
    fields = list(_SUBJECT_FIELDS)
    return {"multi_match": {"query": node.value, "fields": fields, "operator": "and"}}


def _address_query(node: Field) -> Query:
    """Any of the operator's address fields (``to:`` covers Cc too)."""
    return _any_of(
        [c for group in _ADDRESS_GROUPS[node.name] for c in _address_clauses(node, group)]
    )


def _address_clauses(node: Field, group: str) -> list[Query]:
    """Whole address (keyword), a run of address parts, or words of the display name."""
    keyword, names = _ADDRESS_FIELDS[group]
    parts = f"{keyword}.parts"
    value, lowered = node.value, node.value.lower()
    if node.prefix:
        if node.phrase:
            words: Query = {"match_phrase_prefix": {names: {"query": value}}}
        else:
            words = {"match_bool_prefix": {names: {"query": lowered, "operator": "and"}}}
        return [
            {"prefix": {keyword: {"value": lowered}}},
            {"match_bool_prefix": {parts: {"query": lowered, "operator": "and"}}},
            words,
        ]
    if node.phrase:
        words = {"match_phrase": {names: {"query": value}}}
    else:
        words = {"match": {names: {"query": value, "operator": "and"}}}
    return [
        {"term": {keyword: {"value": lowered}}},
        {"match_phrase": {parts: {"query": value}}},
        words,
    ]


def _clause(node: Node) -> Query:
    """One node as a query clause (scored where that means something)."""
    if isinstance(node, Term):
        return _term_query(node)
    if isinstance(node, Phrase):
        return _phrase_query(node)
    if isinstance(node, Field):
        return _subject_query(node) if node.name == "subject" else _address_query(node)
    if isinstance(node, DateBound):
        bound = "gte" if node.after else "lt"
        return {"range": {"ts": {bound: node.epoch_s, "format": "epoch_second"}}}
    if isinstance(node, Thread):
        return {"term": {"thread_key": {"value": node.key}}}
    if isinstance(node, HasAttachment):
        return {"range": {"attachment_count": {"gte": 1}}}
    if isinstance(node, Not):
        # A bool with only must_not matches everything else (OpenSearch adds match_all).
        return {"bool": {"must_not": [_clause(node.node)]}}
    if isinstance(node, And):
        return {"bool": _conjunction(node.nodes)}
    if isinstance(node, Or):
        return _any_of([_clause(child) for child in node.nodes])
    assert_never(node)


def _conjunction(nodes: Iterable[Node | Query]) -> dict[str, list[Query]]:
    """ANDed nodes (or ready clauses) split into ``filter`` / ``must`` / ``must_not`` (empty
    ones left out)."""
    parts: dict[str, list[Query]] = {"filter": [], "must": [], "must_not": []}
    for node in nodes:
        if isinstance(node, dict):
            parts["must"].append(node)
        elif isinstance(node, Not):
            parts["must_not"].append(_clause(node.node))
        elif isinstance(node, _FILTER_NODES):
            parts["filter"].append(_clause(node))
        else:
            parts["must"].append(_clause(node))
    return {key: clauses for key, clauses in parts.items() if clauses}


def _relaxed(nodes: Sequence[Node], any_words: str) -> list[Node | Query]:
    """The top-level nodes with their bare words made one clause: any ``any_words`` of them
    (an OpenSearch ``minimum_should_match``), each word scored as in the strict query."""
    words = [n for n in nodes if isinstance(n, Term)]
    if len(words) < 2:
        return list(nodes)
    loose = {"bool": {"should": [_clause(w) for w in words], "minimum_should_match": any_words}}
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
    body = _conjunction(_relaxed(top, any_words) if any_words is not None else top)
    body["filter"] = [{"term": {MAILBOX_FIELD: mailbox_id}}, *body.get("filter", [])]
    return {"bool": body}


def highlight_spec() -> Query:
    """Snippets for the result list, HTML-escaped by OpenSearch (``encoder: html``).

    ``require_field_match`` is off because most clauses query the ``.exact`` sub-fields:
    their terms must still mark up ``subject``/``clean``. The whole (short) subject comes
    back marked up; the body gives two ~150-char fragments, or its opening when only
    another field matched. Known gap: a quoted phrase of inflected words is matched on the
    unstemmed sub-fields and may go unmarked in the stemmed text, so the ``.exact``
    sub-fields are highlighted too; the API keeps, per field, the variant that marks a match.
    """
    return {
        "encoder": "html",
        "pre_tags": ["<mark>"],
        "post_tags": ["</mark>"],
        "require_field_match": False,
        "fragment_size": 150,
        "number_of_fragments": 2,
        "fields": {
            "subject": {"number_of_fragments": 0},
            "clean": {"no_match_size": 150},
            "subject.exact": {"number_of_fragments": 0},
            "clean.exact": {},
        },
    }


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
) -> Query:
    """The full ``_search`` body. ``search_after`` is the previous page's last ``sort``;
    ``any_words``: see :func:`build_query` (hybrid's relaxed full-text leg).

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
    check_expansion(query)
    sort = sort_spec(sort_by_date=sort_by_date)
    body: Query = {
        "query": query,
        "size": size,
        "sort": sort,
        "track_total_hits": TOTAL_HITS_CAP,
        "highlight": highlight_spec(),
    }
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
