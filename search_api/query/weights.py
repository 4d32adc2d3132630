"""Word weights counted within the caller's mailbox: how rare each free word is there.

The index's similarity reads only the document (mapping v4: no shard-wide idf, which let one
mailbox's order depend on another's words). Rarity still matters to a good order — in
"ingenic timer driver" the rare word should weigh most — so the API counts, in one
``size: 0`` request confined to the mailbox, how many of its messages match each free word,
and weighs each word's clause by BM25's idf of those counts. The counts never leave the
server and come only from the caller's own mailbox.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from search_api.query.ast import And, Node, Or, Term
from search_api.query.clauses import MAILBOX_FIELD, clause

Query = dict[str, Any]
MAX_WEIGHED_WORDS = 16  # a longer query is weighed on its first 16 distinct words


def words(node: Node) -> list[str]:
    """The distinct plain free words (no prefixes, none under a negation), in order."""
    found: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Term) and not n.prefix and n.text not in found:
            found.append(n.text)
        elif isinstance(n, And | Or):
            for child in n.nodes:
                walk(child)

    walk(node)
    return found[:MAX_WEIGHED_WORDS]


def stats_body(node: Node, mailbox_id: str) -> Query | None:
    """The statistics request, or None when fewer than two words could be weighed (one
    word's weight scales every score alike: the order cannot change)."""
    found = words(node)
    if len(found) < 2:
        return None
    return counts_body(mailbox_id, {f"w{i}": clause(Term(w)) for i, w in enumerate(found)})


def counts_body(mailbox_id: str, filters: Mapping[str, Query]) -> Query:
    """How many of the mailbox's messages match each named clause, and how many it has: one
    ``size: 0`` request under the mailbox filter (the only counts the API ranks by)."""
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    return {
        "size": 0,
        "track_total_hits": True,
        "query": {"bool": {"filter": [{"term": {MAILBOX_FIELD: mailbox_id}}]}},
        "aggs": {"df": {"filters": {"filters": dict(filters)}}},
    }


def idf(total: int, matching: int) -> float:
    """BM25's idf (Lucene's form, always positive) of a word in ``matching`` of ``total``."""
    return math.log(1 + (total - matching + 0.5) / (matching + 0.5))


def weights_from(node: Node, total: int, aggregations: Mapping[str, Any]) -> dict[str, float]:
    """Each weighed word's idf, from the statistics request's answer."""
    buckets = aggregations["df"]["buckets"]
    return {
        w: idf(total, int(buckets[f"w{i}"]["doc_count"])) for i, w in enumerate(words(node))
    }


def weighted(node: Node, by_word: Mapping[str, float]) -> Node:
    """The same query with each weighed word's ``weight`` set (what :func:`words` walks:
    nothing under a negation, which weighs no score)."""
    if isinstance(node, Term) and node.text in by_word and not node.prefix:
        return replace(node, weight=by_word[node.text])
    if isinstance(node, And | Or):
        return replace(node, nodes=tuple(weighted(n, by_word) for n in node.nodes))
    return node
