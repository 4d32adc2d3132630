"""How many engine clauses a search body expands to, bounded before the engine is asked.

OpenSearch (Lucene 9) refuses a query whose rewritten form holds more than
``indices.query.bool.max_clause_count`` leaves (1,024 by default) — and says so with an HTTP
500 (``too_many_nested_clauses``). That is the user's query, not an outage, so the API
counts first and answers 400 naming the limit. The estimate follows what the engine does:

* a ``match`` / ``best_fields`` leaf becomes one term clause per analysed token, per field;
* a phrase is one clause per field whatever its length (its terms are one positional query);
* a one-word phrase prefix (``"rel"*``) is rewritten into a disjunction of up to
  ``max_expansions`` (50) indexed terms, per field — so it counts as 50;
* ``bool_prefix`` is its tokens plus one prefix, and a ``prefix`` is one prefix: a prefix
  is rewritten into the indexed terms it matches, and the highlighter runs it as an automaton
  over every token of the hits' text, so a short one costs as much as a phrase prefix —
  ``PREFIX_EXPANSIONS`` for one character, a fifth of that per character more (64 one-letter
  ``to:x*`` prefixes, 384 prefix clauses, took 5–14 s when they each counted as one);
* ``term`` / ``range`` are one each.

Tokens are estimated like the standard tokenizer: a run of letters or digits is one token;
each CJK ideograph, kana, and symbol (emoji) is a token of its own. The estimate errs high;
whatever still slips through is classified as a client error where the engine answers.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from search_api.query.ast import QueryError

# OpenSearch's default indices.query.bool.max_clause_count is 1024; a margin for the
# mailbox filter and what the highlighter adds.
MAX_ENGINE_CLAUSES = 1000
PREFIX_EXPANSIONS = 50  # OpenSearch's default max_expansions of phrase_prefix
_PHRASE_TYPES = frozenset({"phrase", "match_phrase"})
_PREFIX_TYPES = frozenset({"phrase_prefix", "match_phrase_prefix"})
_BOOL_PREFIX_TYPES = frozenset({"bool_prefix", "match_bool_prefix"})


def is_unspaced(char: str) -> bool:
    """A character the standard tokenizer makes a token of its own: CJK ideographs, kana,
    and symbols such as emoji (scripts written without spaces between words)."""
    if unicodedata.category(char) == "So":
        return True
    name = unicodedata.name(char, "")
    return name.startswith(("CJK ", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA"))


def token_count(text: str) -> int:
    """Tokens the standard analyser makes of ``text`` (an estimate that errs high)."""
    count, in_word = 0, False
    for char in text:
        if is_unspaced(char):
            count, in_word = count + 1, False
        elif char.isalnum():
            count, in_word = count + (not in_word), True
        else:
            in_word = False
    return count


def prefix_cost(prefix: str) -> int:
    """Clauses a prefix of this text costs: 50 for one character, 10 for two, 2 for three,
    1 from four on (an estimate of how many indexed terms share it, that errs high)."""
    last = _last_token(prefix)
    return max(1, PREFIX_EXPANSIONS // int(5 ** max(len(last) - 1, 0)))


def _last_token(text: str) -> str:
    token = ""
    for char in reversed(text):
        if not char.isalnum() or is_unspaced(char):
            if token:
                break
            continue
        token = char + token
    return token or text


def _text_cost(text: str, kind: str) -> int:
    tokens = token_count(text)
    if kind in _PHRASE_TYPES:
        return 1
    if kind in _PREFIX_TYPES:
        return PREFIX_EXPANSIONS if tokens <= 1 else prefix_cost(text)
    if kind in _BOOL_PREFIX_TYPES:
        return max(tokens - 1, 0) + prefix_cost(text)
    return max(tokens, 1)


def estimated_clauses(query: Any) -> int:
    """Engine clauses ``query`` (a query DSL dict, or a list of them) expands to."""
    if isinstance(query, list):
        return sum(estimated_clauses(q) for q in query)
    total = 0
    for kind, spec in query.items():
        if kind == "bool":
            total += sum(
                estimated_clauses(v) for k, v in spec.items() if k != "minimum_should_match"
            )
        elif kind == "multi_match":
            total += len(spec["fields"]) * _text_cost(spec["query"], spec.get("type", ""))
        elif kind.startswith("match"):
            total += sum(_text_cost(body["query"], kind) for body in spec.values())
        elif kind == "prefix":
            total += sum(prefix_cost(body["value"]) for body in spec.values())
        else:
            total += 1
    return total


def check_expansion(query: Any, limit: int = MAX_ENGINE_CLAUSES) -> None:
    """Raise :class:`QueryError` (a 400) when ``query`` would exceed the engine's limit."""
    clauses = estimated_clauses(query)
    if clauses > limit:
        raise QueryError(
            0,
            f"query expands to about {clauses} engine clauses (at most {limit}): "
            "use fewer words, fields or prefixes",
        )
