"""Query clauses of one parsed node: the leaves a search body is made of (plain dicts).

Field choice follows ``mappings/messages-v3.json``: ``subject``/``clean`` are stemmed
(recall; the stemmed subject also drops ``Re:``/``Fwd:``/``[list-tag]`` prefixes so they do
not weigh on relevance), their ``.exact`` sub-fields are only lowercased and folded
(phrases, prefixes, exact words, the prefixes included), and their ``.parts`` sub-fields
split on every non-alphanumeric: a word joined by punctuation (``lib/message-file.c``,
``notmuch_message_file_get_header``) is searched as a phrase of its parts, as Xapian's
phrase generators do for notmuch, so it also matches inside a longer path or identifier.
Address keywords are lowercased by a normalizer and their ``.parts`` split on
non-alphanumerics so an address, its local part or its domain match; ``to:`` searches the Cc
recipients too (as notmuch's ``to:`` does). The user's text is only ever a leaf *value*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, assert_never

from indexer.core.language import ANALYZERS, body_field, subject_field
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
from search_api.query.expansion import is_unspaced

Query = dict[str, Any]

MAILBOX_FIELD = "mailbox_id"

# Mapping v7: the subject and body again in the message's own language (only the detected
# language's pair holds anything). A word is analyzed by each field's analyzer, so ``Rechnungen``
# meets ``Rechnung`` in German mail; an index of an older version has none of these fields,
# and a field missing from the mapping matches nothing (no error). Each language costs a word
# two engine clauses, so a search asks only the languages its mailbox holds
# (:func:`in_languages`, set by the API from ``search_api.languages``); unset, every one.
_LANGUAGES: ContextVar[frozenset[str] | None] = ContextVar("mail_languages", default=None)
_LANGUAGE_FIELD_SET = frozenset(
    f for c in ANALYZERS for f in (subject_field(c), f"{subject_field(c)}^3", body_field(c)))
_BASE_TEXT_FIELDS = (
    "subject^3",
    "clean",
    "subject.exact^3",
    "clean.exact",
    "subject.parts^3",
    "clean.parts",
)
_BASE_SUBJECT_FIELDS = ("subject", "subject.exact", "subject.parts")


@contextmanager
def in_languages(codes: frozenset[str] | None) -> Iterator[None]:
    """Within the block, free and ``subject:`` words ask the language fields of ``codes``
    only (None: of every language). A context variable: a search leg run by
    ``Backends.concurrently`` inherits it."""
    token = _LANGUAGES.set(codes)
    try:
        yield
    finally:
        _LANGUAGES.reset(token)


def _languages() -> list[str]:
    asked = _LANGUAGES.get()
    return [c for c in ANALYZERS if asked is None or c in asked]


def _text_fields() -> list[str]:
    return [*_BASE_TEXT_FIELDS,
            *(f for c in _languages() for f in (f"{subject_field(c)}^3", body_field(c)))]


def _subject_fields() -> list[str]:
    return [*_BASE_SUBJECT_FIELDS, *(subject_field(c) for c in _languages())]


_EXACT_FIELDS = ("subject.exact^3", "clean.exact")
_PARTS_FIELDS = ("subject.parts^3", "clean.parts")
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
# Yes/no constraints: filter context (cached, unscored) when they are ANDed.
_FILTER_NODES = (DateBound, Thread, HasAttachment)


def any_of(clauses: list[Query]) -> Query:
    return {"bool": {"should": clauses, "minimum_should_match": 1}}


def _term_query(node: Term) -> Query:
    query = _unweighted_term_query(node)
    if node.weight != 1.0:
        query["multi_match"]["boost"] = round(node.weight, 4)
    return query


def _unweighted_term_query(node: Term) -> Query:
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
        # word is a phrase of them — one clause per field however long the text is. Not
        # asked of the language fields: CJK keeps its bigrams, which they do not make.
        fields = list(_BASE_TEXT_FIELDS)
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
            "fields": _text_fields(),
            "operator": "and",
        }
    }


def without_language_fields(query: Any) -> Any:
    """``query`` with the language fields left out of every ``multi_match`` (the snippets:
    the highlighter marks ``subject``/``clean`` and their sub-fields only, so clauses on the
    language fields would cost engine clauses and mark nothing)."""
    if isinstance(query, list):
        return [without_language_fields(q) for q in query]
    if not isinstance(query, dict):
        return query
    out: dict[str, Any] = {}
    for key, value in query.items():
        if key == "multi_match" and isinstance(value, dict):
            fields = [f for f in value["fields"] if f not in _LANGUAGE_FIELD_SET]
            out[key] = {**value, "fields": fields}
        else:
            out[key] = without_language_fields(value)
    return out


def _has_unspaced(text: str) -> bool:
    return any(is_unspaced(char) for char in text)


# Mapping v6 indexes every prefix of 1-19 characters of the words phrase prefixes search.
MAX_PREFIX_CHARS = 19


def one_word(text: str) -> bool:
    """A phrase of one word (no space in it): its prefix is a plain prefix."""
    return len(text.split()) <= 1


def phrase_prefix_text(text: str) -> str:
    """The phrase with its last word cut to :data:`MAX_PREFIX_CHARS`: a longer one would be
    expanded from the segment's whole dictionary (every mailbox's words) instead of looked up
    in the prefix field, so it matches the words that start with its first 19 characters."""
    head, _, last = text.rstrip().rpartition(" ")
    cut = last[:MAX_PREFIX_CHARS]
    return f"{head} {cut}" if head else cut


# The mapping version whose prefix fields let a multi-word phrase prefix look its last word up.
PREFIX_FIELDS_VERSION = 6


def expands_a_phrase_prefix(node: Node) -> bool:
    """Whether the query holds a phrase prefix of several words, which an index older than
    :data:`PREFIX_FIELDS_VERSION` would expand from every mailbox's words."""
    if isinstance(node, Phrase):
        return node.prefix and not one_word(node.text)
    if isinstance(node, Field):
        return node.phrase and node.prefix and not one_word(node.value)
    if isinstance(node, Not):
        return expands_a_phrase_prefix(node.node)
    if isinstance(node, And | Or):
        return any(expands_a_phrase_prefix(child) for child in node.nodes)
    return False


def _phrase_query(node: Phrase) -> Query:
    """A phrase; a phrase prefix expands its last word only within the mailbox (issue 38):
    one word is a plain prefix (constant score, every term), several a ``phrase_prefix``
    whose last word is one term of mapping v6's prefix fields."""
    if not node.prefix:
        return {"multi_match": {"query": node.text, "type": "phrase",
                                "fields": list(_EXACT_FIELDS)}}
    if one_word(node.text):
        return _unweighted_term_query(Term(node.text, prefix=True))
    return {"multi_match": {"query": phrase_prefix_text(node.text), "type": "phrase_prefix",
                            "fields": list(_EXACT_FIELDS)}}


def _names_prefix(field: str, value: str, phrase: bool) -> Query:
    """Words of a display name typed as a prefix: several quoted words a phrase prefix (its
    last word one term of the prefix field), else every word, the last a plain prefix."""
    if phrase and not one_word(value):
        return {"match_phrase_prefix": {field: {"query": phrase_prefix_text(value)}}}
    return {"match_bool_prefix": {field: {"query": value.lower(), "operator": "and"}}}


def _subject_query(node: Field) -> Query:
    if node.prefix:
        return _names_prefix("subject.exact", node.value, node.phrase)
    if node.phrase or _has_unspaced(node.value):
        return {"match_phrase": {"subject.exact": {"query": node.value}}}
    # The stemmed subject lacks the Re:/[tag] prefixes; the exact one still has them.
    fields = _subject_fields()
    return {"multi_match": {"query": node.value, "fields": fields, "operator": "and"}}


def _address_query(node: Field) -> Query:
    """Any of the operator's address fields (``to:`` covers Cc too)."""
    return any_of(
        [c for group in _ADDRESS_GROUPS[node.name] for c in _address_clauses(node, group)]
    )


def _address_clauses(node: Field, group: str) -> list[Query]:
    """Whole address (keyword), a run of address parts, or words of the display name."""
    keyword, names = _ADDRESS_FIELDS[group]
    parts = f"{keyword}.parts"
    value, lowered = node.value, node.value.lower()
    if node.prefix:
        words: Query = _names_prefix(names, value, node.phrase)
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


def clause(node: Node) -> Query:
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
        return {"bool": {"must_not": [clause(node.node)]}}
    if isinstance(node, And):
        return {"bool": conjunction(node.nodes)}
    if isinstance(node, Or):
        return any_of([clause(child) for child in node.nodes])
    assert_never(node)


def conjunction(nodes: Iterable[Node | Query]) -> dict[str, list[Query]]:
    """ANDed nodes (or ready clauses) split into ``filter`` / ``must`` / ``must_not`` (empty
    ones left out)."""
    parts: dict[str, list[Query]] = {"filter": [], "must": [], "must_not": []}
    for node in nodes:
        if isinstance(node, dict):
            parts["must"].append(node)
        elif isinstance(node, Not):
            parts["must_not"].append(clause(node.node))
        elif isinstance(node, _FILTER_NODES):
            parts["filter"].append(clause(node))
        else:
            parts["must"].append(clause(node))
    return {key: clauses for key, clauses in parts.items() if clauses}

