""""Did you mean": a corrected query built only from the caller's own mailbox's words.

Why not OpenSearch's term or phrase suggesters: they read the shard's term dictionary, which
holds every tenant's words — a typo close to a word only another mailbox holds would be
"corrected" to it, telling the caller that word exists elsewhere (invariant 6 of the design).
Here every word proposed is one that occurs in a message of the caller's mailbox, learnt from
those messages only:

1. **Which words are suspect**: one ``size: 0`` request under the mailbox filter counts the
   messages each free word of the query matches (the search's own clause for the word, so
   stemmed forms count). A word in at most :data:`RARE` messages is suspect (mail has typos
   too: a word found once beside a word found 50 times is most likely one).
2. **Candidates one edit away**: every word one edit from a suspect (a letter deleted,
   inserted, substituted, two adjacent letters swapped: 545 for a 10-letter word) is a
   ``term`` filter on the unstemmed body, counted in one ``size: 0`` request among the
   mailbox's messages that hold any of them: each candidate's messages, exactly. A word only
   another mailbox holds counts 0 and is never offered.
3. **Two edits**, only for a word of six letters or more that none of those correct: a
   ``fuzzy`` query (Damerau-Levenshtein), *filtered to the mailbox*, highlights the words it
   matched in up to :data:`SAMPLE` of the mailbox's messages. The fuzzy query's expansion of
   the typo to dictionary terms is the shard's (:data:`MAX_EXPANSIONS`), but only the
   mailbox's messages can match, and only words of those messages are read back. (Residual,
   as for a prefix: which terms the expansion keeps may depend on other mailboxes' words when
   more than :data:`MAX_EXPANSIONS` are within reach, so a correction can be missed, never
   leaked.)
4. **The choice**: the :data:`CANDIDATES_PER_WORD` likeliest candidates are counted as the
   search counts a word (subject and body, stemmed), beside the typed query and the likeliest
   correction (one request); the closest by edit distance wins, then one that is the word
   with two adjacent letters swapped, then the most frequent; it must be in at least
   :data:`RARER` times as many messages as the word (any, for a word the mailbox lacks).
5. **Its hits**: the corrected query's count in the mailbox (the full-text query, all words),
   from that request (or one more when the counts chose another correction): null when it
   finds no more than the typed query did.

Why candidates one edit away are generated rather than found by the fuzzy query's highlights:
the sample of 30 messages missed the right word when commoner neighbours crowded it out, and
highlighting re-analyses the sampled bodies (the index keeps no offsets); the generated words
are counted in every message of the mailbox, for about the same time (docs/quality.md).

The caller's text never becomes anything but a leaf value of these queries.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from indexer.core.errors import PoisonError, TransientError
from search_api.backends import Backends
from search_api.engine_errors import naming
from search_api.models import DidYouMean
from search_api.query import Node, QueryError, parse
from search_api.query.ast import Term
from search_api.query.clauses import MAILBOX_FIELD, clause
from search_api.query.opensearch import build_query
from search_api.query.weights import words as free_words

log = logging.getLogger(__name__)

RARE = 2  # a word in more of the mailbox's messages than this is taken as meant
RARER = 20  # a rare (not absent) word yields to one in this many times more messages
MIN_LENGTH = 4  # shorter words are too often meant as typed (and too close to everything)
MAX_SUSPECTS = 4
SAMPLE = 30  # messages whose matched words are read
MAX_EXPANSIONS = 200
CANDIDATES_PER_WORD = 4
MAX_VARIANTS = 2_000  # words one edit away counted in one request (a 10-letter word has 545)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
FIELDS = ("subject.exact", "clean.exact")
# Candidates one edit away are looked up in the body only: a term filter per candidate and
# field is a dictionary seek per segment, and the subject's words were measured to add no
# right suggestion while doubling that request (docs/quality.md).
VARIANT_FIELD = "clean.exact"
_PRE, _POST = "\u0002", "\u0003"
_MARKED = re.compile(f"{_PRE}([^{_POST}]{{1,100}}){_POST}")


def fold(text: str) -> str:
    """Lower-cased, accents removed: as the ``.exact`` fields store a word."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions and
    transpositions of two adjacent letters each cost one (what ``fuzzy`` counts)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def _swapped(a: str, b: str) -> bool:
    """``a`` is ``b`` with two adjacent letters swapped (the commonest typing slip, so it
    wins a tie of edit distance)."""
    if len(a) != len(b) or a == b:
        return False
    diff = [i for i in range(len(a)) if a[i] != b[i]]
    return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and (
        a[diff[1]] == b[diff[0]])


def allowed_edits(word: str) -> int:
    """OpenSearch's ``AUTO`` fuzziness: 0 up to 2 letters, 1 up to 5, then 2."""
    return 0 if len(word) < 3 else 1 if len(word) < 6 else 2


def _spellable(word: str) -> bool:
    """Latin letters only (accents allowed): no digits, identifiers, CJK or short words."""
    folded = fold(word)
    return len(folded) >= MIN_LENGTH and folded.isascii() and folded.isalpha()


def _filtered(mailbox: str, query: dict[str, Any] | None = None) -> dict[str, Any]:
    must: list[dict[str, Any]] = [{"term": {MAILBOX_FIELD: mailbox}}]
    if query is not None:
        must.append(query)
    return {"bool": {"filter": must}}


def _counts(b: Backends, mailbox: str, named: Mapping[str, dict[str, Any]],
            within: dict[str, Any] | None = None) -> dict[str, int]:
    """Messages of the mailbox each query matches (one request; ``within``: a query every
    one of them implies, which bounds the messages the counts are taken over)."""
    body = {
        "size": 0,
        "track_total_hits": False,
        "query": _filtered(mailbox, within),
        "aggs": {"c": {"filters": {"filters": dict(named)}}},
    }
    answer = _ask(b, mailbox, body)
    buckets = ((answer.get("aggregations") or {}).get("c") or {}).get("buckets", {})
    return {name: int(buckets.get(name, {}).get("doc_count", 0)) for name in named}


def _ask(b: Backends, mailbox: str, body: dict[str, Any]) -> dict[str, Any]:
    with naming("opensearch"):
        return b.opensearch.search_response(mailbox, body, budget_ms=b.settings.search_timeout_ms)


def variants(word: str) -> set[str]:
    """Every word one edit from ``word`` (folded, letters a–z): a letter deleted, inserted
    or substituted, or two adjacent letters swapped."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    found = {a + b[1:] for a, b in splits if b}
    found |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    found |= {a + c + b[1:] for a, b in splits if b for c in LETTERS}
    found |= {a + c + b for a, b in splits for c in LETTERS}
    found.discard(word)
    return {v for v in found if len(v) >= 2}


def _one_edit(b: Backends, mailbox: str, suspects: list[str]) -> dict[str, dict[str, int]]:
    """Per suspect word, the words one edit away that the mailbox's messages hold, with the
    number of its messages each is in: every such word of the bodies, exactly, in one
    ``size: 0`` request (a ``term`` filter per candidate on the unstemmed body, counted only
    among the mailbox's messages holding one of them)."""
    per = {w: sorted(variants(fold(w)))[:MAX_VARIANTS // len(suspects)] for w in suspects}
    every = sorted({v for vs in per.values() for v in vs})
    named = {f"v{i}_{j}": {"term": {VARIANT_FIELD: v}}
             for i, vs in enumerate(per.values()) for j, v in enumerate(vs)}
    found = _counts(b, mailbox, named, {"terms": {VARIANT_FIELD: every}})
    return {w: {v: found[f"v{i}_{j}"] for j, v in enumerate(vs) if found[f"v{i}_{j}"]}
            for i, (w, vs) in enumerate(per.items())}


def _near_words(b: Backends, mailbox: str, suspects: list[str]) -> dict[str, dict[str, int]]:
    """Per suspect word, the mailbox's words within its edits that the fuzzy query marked,
    with the number of sampled messages each was marked in."""
    # A message with a word one edit away ranks before one with a word two edits away (so
    # a frequent word two edits off cannot crowd the nearer one out of the sample).
    fuzzy = [
        {"constant_score": {"boost": 10.0 ** (2 - edits_), "filter": {"fuzzy": {f: {
            "value": fold(w), "fuzziness": edits_, "transpositions": True,
            "max_expansions": MAX_EXPANSIONS, "prefix_length": 0}}}}}
        for w in suspects for f in FIELDS
        for edits_ in range(1, allowed_edits(fold(w)) + 1)
    ]
    should = {"bool": {"should": fuzzy, "minimum_should_match": 1}}
    body = {
        "size": SAMPLE,
        "track_total_hits": False,
        "_source": False,
        # scored (``must``), so the nearer words' boosts order the sample
        "query": {"bool": {"filter": [{"term": {MAILBOX_FIELD: mailbox}}], "must": [should]}},
        "highlight": {
            "type": "unified",
            "pre_tags": [_PRE],
            "post_tags": [_POST],
            "number_of_fragments": 3,
            "fragment_size": 60,
            "max_analyzer_offset": 20_000,
            "fields": {f: {} for f in FIELDS},
        },
    }
    answer = _ask(b, mailbox, body)
    near: dict[str, dict[str, int]] = {w: {} for w in suspects}
    for hit in answer.get("hits", {}).get("hits", []):
        seen: set[str] = set()
        for fragments in (hit.get("highlight") or {}).values():
            for fragment in fragments:
                seen.update(fold(m) for m in _MARKED.findall(fragment))
        for marked in seen:
            for w in suspects:
                folded = fold(w)
                if marked != folded and edits(marked, folded) <= allowed_edits(folded):
                    near[w][marked] = near[w].get(marked, 0) + 1
    return near


def _closest(word: str, found: Mapping[str, int]) -> list[str]:
    """The candidates worth counting: fewest edits first, then most often marked."""
    folded = fold(word)
    return sorted(found, key=lambda c: (edits(c, folded), not _swapped(c, folded), -found[c],
                                        c))[:CANDIDATES_PER_WORD]


def _replaced(q: str, corrections: Mapping[str, str]) -> str:
    """``q`` with each corrected free word replaced where it stands as a word (not an
    operator's value), its first letter's case kept."""
    for word, better in corrections.items():
        def swap(match: re.Match[str], better: str = better) -> str:
            typed = match.group(0)
            return better[:1].upper() + better[1:] if typed[:1].isupper() else better

        q = re.sub(rf"(?<![\w:]){re.escape(word)}(?!\w)", swap, q, flags=re.IGNORECASE)
    return q


def did_you_mean(b: Backends, mailbox: str, q: str, node: Node) -> DidYouMean | None:
    """A better query of the caller's mailbox's own words, or None; a failure of the engine
    here only leaves the suggestion out (the search itself has answered)."""
    try:
        return _did_you_mean(b, mailbox, q, node)
    except (PoisonError, TransientError, QueryError) as exc:
        log.info("did-you-mean left out: %s", type(exc).__name__)
        return None


def _choice(word: str, found: Mapping[str, int], had: int) -> str | None:
    """The correction among candidates with their messages: fewest edits, then a swap of
    two adjacent letters, then the most frequent; it must be in at least :data:`RARER`
    times as many messages as the word (any, for a word the mailbox lacks)."""
    folded = fold(word)
    scored = [(edits(c, folded), not _swapped(c, folded), -n, c)
              for c, n in found.items() if n >= max(1, RARER * had)]
    return min(scored)[3] if scored else None


def _did_you_mean(b: Backends, mailbox: str, q: str, node: Node) -> DidYouMean | None:
    spellable = [w for w in free_words(node) if _spellable(w)][:16]
    if not spellable:
        return None
    counts = _counts(b, mailbox, {f"w{i}": clause(Term(w)) for i, w in enumerate(spellable)})
    suspects = [w for i, w in enumerate(spellable) if counts[f"w{i}"] <= RARE][:MAX_SUSPECTS]
    if not suspects:
        return None
    had = {w: counts[f"w{spellable.index(w)}"] for w in suspects}
    near = _one_edit(b, mailbox, suspects)
    # Two edits only where one found nothing: a fuzzy sample of the mailbox's messages.
    far = [w for w in suspects
           if allowed_edits(fold(w)) == 2 and _choice(w, near[w], had[w]) is None]
    if far:
        near.update(_near_words(b, mailbox, far))
    shortlist = {w: _closest(w, found) for w, found in near.items() if found}
    if not shortlist:
        return None
    # The likeliest candidates' counts as the search counts a word (subject and body,
    # stemmed), the typed query's and (speculatively) the one of each word's likeliest, in
    # one request; another only if the counts choose differently.
    guess = _replaced(q, {w: options[0] for w, options in shortlist.items()})
    named = {f"c{i}_{j}": clause(Term(c))
             for i, w in enumerate(shortlist) for j, c in enumerate(shortlist[w])}
    named["typed"] = build_query(node, mailbox)
    named["guess"] = build_query(parse(guess), mailbox)
    frequency = _counts(b, mailbox, named)
    corrections = {
        w: c for i, (w, options) in enumerate(shortlist.items())
        if (c := _choice(w, {o: frequency[f"c{i}_{j}"] for j, o in enumerate(options)},
                         had[w])) is not None
    }
    better = _replaced(q, corrections)
    if not corrections or better == q:
        return None
    hits = (frequency["guess"] if better == guess else
            _counts(b, mailbox, {"better": build_query(parse(better), mailbox)})["better"])
    if hits <= frequency["typed"]:
        return None
    return DidYouMean(q=better, hits=hits)
