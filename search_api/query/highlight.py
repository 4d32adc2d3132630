"""Snippets for the page being returned, at a cost bounded by the query's text, not its
address or date operators.

The highlighter runs its query's terms over every token of each hit's fetched text: with
``require_field_match`` off and the whole search query as its query, every ``to:x*``
automaton ran over every body token — 64 one-letter address prefixes took 5–14 s on a
4,000-message mailbox for a query the engine answered in 0.28 s. So snippets come from a
``highlight_query`` of the positive free-text and subject clauses only, each field marked
only by the clauses that query it (``require_field_match``), and only for the hits of the
page (the API asks for ``limit + 1``; hybrid highlights its fused page in a second request).

The highlighter re-analyses each hit's text (the mapping keeps no offsets), so a page holding a
few bodies of 100-400 KB (patches, logs) cost 150-240 ms at 100,000 messages while the search
itself took 10 ms. It reads only the first ``HIGHLIGHT_MAX_CHARS`` characters of each field
(OpenSearch's ``max_analyzer_offset``, 2.2+): a match further down is found and ranked as ever,
only its snippet is the body's opening instead (docs/search-api.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from search_api.query.ast import And, Field, Node, Or, Phrase, Term
from search_api.query.clauses import MAILBOX_FIELD, clause, without_language_fields

Query = dict[str, Any]

# The whole of 97 % of linux-mips bodies and 99 % of lkml's
# (docs/results/runs/2026-12-03-100k-highlight.md); offsets in the postings would lift the
# bound at +50 % index size (measured, not shipped).
HIGHLIGHT_MAX_CHARS = 20_000


def text_nodes(node: Node) -> list[Node]:
    """The positive free-text and subject nodes: what a snippet can show matching. A negated
    word matches nothing shown, an address or a date lives outside ``subject``/``clean``."""
    if isinstance(node, Term | Phrase):
        return [node]
    if isinstance(node, Field):
        return [node] if node.name == "subject" else []
    if isinstance(node, And | Or):
        return [found for child in node.nodes for found in text_nodes(child)]
    return []  # Not, DateBound, Thread, HasAttachment


def highlight_query(node: Node) -> Query:
    """Any of the text clauses (``match_none`` without one: only the body's opening shows)."""
    clauses = [without_language_fields(clause(n)) for n in text_nodes(node)]
    if not clauses:
        return {"match_none": {}}
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def highlight_spec(node: Node) -> Query:
    """Snippets for the result list, HTML-escaped by OpenSearch (``encoder: html``).

    Most clauses query the ``.exact`` or ``.parts`` sub-fields, so those are highlighted
    beside ``subject``/``clean`` (each by the clauses on it: ``require_field_match``); the
    API keeps, per field, the first variant that marks a match. The whole (short) subject
    comes back marked up; the body gives two ~150-char fragments, or its opening when only
    another field matched. Only a field's first ``HIGHLIGHT_MAX_CHARS`` characters are read.
    """
    return {
        "encoder": "html",
        "pre_tags": ["<mark>"],
        "post_tags": ["</mark>"],
        "require_field_match": True,
        "highlight_query": highlight_query(node),
        "fragment_size": 150,
        "number_of_fragments": 2,
        "max_analyzer_offset": HIGHLIGHT_MAX_CHARS,
        "fields": {
            "subject": {"number_of_fragments": 0},
            "clean": {"no_match_size": 150},
            "subject.exact": {"number_of_fragments": 0},
            "clean.exact": {},
            "subject.parts": {"number_of_fragments": 0},
            "clean.parts": {},
        },
    }


def page_highlight_body(node: Node, mailbox_id: str, message_keys: Sequence[str]) -> Query:
    """A request for the snippets of one page's hits only (fused or semantic pages, whose
    candidates were fetched without snippets), confined to the mailbox like every search."""
    return {
        "query": {
            "bool": {
                "filter": [
                    {"term": {MAILBOX_FIELD: mailbox_id}},
                    {"terms": {"message_key": list(message_keys)}},
                ]
            }
        },
        "size": len(message_keys),
        "_source": ["message_key"],
        "highlight": highlight_spec(node),
    }
