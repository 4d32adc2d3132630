""""Similar emails" by terms, chosen within the caller's mailbox: plain dicts, no client.

Why not OpenSearch's ``more_like_this``: it picks the liked message's terms by tf·idf with the
**shard's** document frequencies, so which words it chose — and so the answer — moved when
another mailbox's mail was indexed, and a tenant who planted a ladder of messages could read
other mailboxes' word counts back from the order (issue 38: 9 words' counts in 9 calls). Here
the same choice is made from counts taken inside the mailbox, in three steps, each confined:

1. :func:`term_vectors_request`: the liked message's own terms and their frequencies in it
   (``_termvectors`` without term or field statistics: nothing of any other document);
2. :func:`counts_body`: how many of the mailbox's messages hold each of its most frequent
   terms (a ``filters`` aggregation under the mailbox filter, as the word weights count);
3. :func:`terms_body`: each field's ``MAX_QUERY_TERMS`` best by tf·idf (``more_like_this``'s
   classic idf, of the mailbox's counts) as plain ``term`` clauses under the index's
   per-document similarity, with ``more_like_this``'s own ``minimum_should_match`` of 30 %.

The source document is named by id (and routed to its mailbox), never by its text, and the
chosen terms travel only as ``term`` values. How much of the source is read: where the index
defines :data:`LIKED_BODY_ANALYZER` (mapping version 5: ``mail_text`` behind a 2,000-token
``limit``), the body's first 2,000 tokens — the whole body of 97 % of mail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from search_api.query import weights
from search_api.query.opensearch import MAILBOX_FIELD, sort_spec

BODY_FIELD = "clean"
# The stemmed subject (without Re:/[tag] prefixes) and the body: what a message is about.
MLT_FIELDS = ("subject", BODY_FIELD)
# The analyzer of mappings/messages-v5.json that reads a liked body's first 2,000 tokens.
LIKED_BODY_ANALYZER = "mail_text_liked"
MAX_QUERY_TERMS = 25  # more_like_this's own default, which the eval's figures were tuned with
# Terms counted in the mailbox: the liked message's most frequent ones. A message has fewer
# distinct terms than this in most mail; a long patch is cut to its most repeated identifiers.
CANDIDATE_TERMS = 96
MINIMUM_SHOULD_MATCH = "30%"

FieldTerm = tuple[str, str]


def term_vectors_request(
    doc_id: str, fields: tuple[str, ...] = MLT_FIELDS, liked_analyzer: str | None = None
) -> dict[str, Any]:
    """The ``_termvectors`` body: the document's own term frequencies only (no term or field
    statistics, which are the shard's), its body read by ``liked_analyzer`` when given."""
    body: dict[str, Any] = {
        "fields": list(fields),
        "positions": False,
        "offsets": False,
        "payloads": False,
        "term_statistics": False,
        "field_statistics": False,
    }
    if liked_analyzer and BODY_FIELD in fields:
        body["per_field_analyzer"] = {BODY_FIELD: liked_analyzer}
    return body


def liked_terms(answer: Mapping[str, Any]) -> dict[FieldTerm, int]:
    """(field, term) -> frequency in the liked message, from a ``_termvectors`` answer."""
    found: dict[FieldTerm, int] = {}
    for name, vector in (answer.get("term_vectors") or {}).items():
        for term, stats in (vector.get("terms") or {}).items():
            found[(str(name), str(term))] = int(stats.get("term_freq", 1))
    return found


def candidates(tf: Mapping[FieldTerm, int], limit: int = CANDIDATE_TERMS) -> list[FieldTerm]:
    """Each field's ``limit`` most frequent terms (longer first on a tie, then by name: the
    same message always yields the same list)."""
    chosen: list[FieldTerm] = []
    for field in sorted({f for f, _ in tf}):
        own = [ft for ft in tf if ft[0] == field]
        chosen += sorted(own, key=lambda ft: (-tf[ft], -len(ft[1]), ft))[:limit]
    return chosen


def counts_body(mailbox_id: str, chosen: list[FieldTerm]) -> dict[str, Any]:
    """How many of the mailbox's messages hold each chosen term (and how many it has)."""
    return weights.counts_body(mailbox_id, {
        f"t{i}": {"term": {field: {"value": term}}} for i, (field, term) in enumerate(chosen)})


def idf(total: int, matching: int) -> float:
    """The idf ``more_like_this`` weighs a term by (Lucene's classic one), of counts within
    the mailbox: a frequent word of the message still counts, as it did there."""
    return 1.0 + math.log((total + 1) / (matching + 1))


def best_terms(
    tf: Mapping[FieldTerm, int],
    chosen: list[FieldTerm],
    counts: Mapping[str, Any],
    limit: int = MAX_QUERY_TERMS,
) -> list[FieldTerm]:
    """Each field's ``limit`` chosen terms of highest tf·idf within the mailbox (a queue per
    field, as ``more_like_this`` keeps one). A term only the liked message holds (count 1,
    itself) is kept as ``more_like_this`` kept it (``min_doc_freq`` 1): it matches nothing
    else, but counts toward the 30 % that must match, which the eval's figures were tuned
    with."""
    total = int(counts["hits"]["total"]["value"])
    buckets = counts.get("aggregations", {}).get("df", {}).get("buckets", {})
    by_field: dict[str, list[tuple[float, FieldTerm]]] = {}
    for i, ft in enumerate(chosen):
        matching = int(buckets.get(f"t{i}", {}).get("doc_count", 0))
        if matching >= 1:
            by_field.setdefault(ft[0], []).append((tf[ft] * idf(total, matching), ft))
    best: list[FieldTerm] = []
    for field in sorted(by_field):
        scored = sorted(by_field[field], key=lambda pair: (-pair[0], pair[1]))
        best += [ft for _, ft in scored[:limit]]
    return best


def terms_body(
    *,
    mailbox_id: str,
    doc_id: str,
    thread_key: str | None,
    terms: list[FieldTerm],
    size: int,
) -> dict[str, Any]:
    """Documents of ``mailbox_id`` holding the most of ``terms`` (the source itself, and its
    whole thread when ``thread_key`` is set, left out); None-like (no clause) when empty."""
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    must_not: list[dict[str, Any]] = [{"ids": {"values": [doc_id]}}]
    if thread_key:
        must_not.append({"term": {"thread_key": {"value": thread_key}}})
    should = [{"term": {field: {"value": term}}} for field, term in terms]
    return {
        "query": {
            "bool": {
                "filter": [{"term": {MAILBOX_FIELD: mailbox_id}}],
                "must": [{"bool": {"should": should,
                                   "minimum_should_match": MINIMUM_SHOULD_MATCH}}],
                "must_not": must_not,
            }
        },
        "size": size,
        # message_key breaks ties (unique in a mailbox): equal scores are common under the
        # per-document similarity, and the engine's own tie order follows segment merges,
        # which another mailbox's writes cause.
        "sort": sort_spec(sort_by_date=False),
        "_source": ["message_key", "thread_key", "ts"],
    }
