"""Search orchestration: engine candidates → page → join to hot rows (with repair).

Paging: full-text (without collapse) pages with OpenSearch ``search_after`` — stable, no
deep offsets. Semantic, hybrid and thread-collapsed results page through a bounded candidate
list (``DEPTH``) by offset; the cursor says where, and the list is recomputed
deterministically per request.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from indexer.core.errors import PoisonError, TransientError
from indexer.core.items import message_sk, thread_pk
from indexer.core.plan import MessageRef
from indexer.metrics import MALFORMED_FIELDS
from indexer.settings import Settings
from search_api.backends import Backends, BackendUnavailable
from search_api.cursor import CursorError
from search_api.query import (
    HybridTuning,
    Node,
    QueryError,
    build_search_body,
    free_text,
    page_highlight_body,
    rrf,
    vector_filter,
)
from search_api.vector_search import search as vector_search

DEPTH = 200  # candidates per engine for semantic / collapsed pages
# Hybrid search as shipped, tuned on the semantic query set's tune half (`sidecar eval
# --semantic --tune`, docs/quality.md): any one free word admits a full-text candidate, and the
# full-text ranking weighs a quarter of the semantic one; 100 candidates from each leg.
HYBRID = HybridTuning(
    k=60, text_weight=0.25, vector_weight=1.0, text_depth=100, vector_depth=100, any_words="1"
)
ROW_FIELDS = (
    "message_id",
    "thread_id",
    "subject",
    "date",
    "ts",
    "forai",
    "attachment_count",
    "size_bytes",
    "spec_version",
    "in_reply_to",
    "clean_fallback",
)
THREAD_SIZE = "thread_messages"  # messages in the hit's thread (the thread summary's count)


@dataclass
class Candidate:
    message_key: str
    thread_key: str
    ts: int
    score: float
    highlights: dict[str, list[str]] | None = None
    thread_hits: int | None = None
    sort: list[Any] = field(default_factory=list)


def os_search(backends: Backends, mailbox: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """One search within the time budget the engine enforces (``SIDECAR_SEARCH_TIMEOUT_MS``):
    over it, or refused, it is the caller's 400; the engine down (or not reached when the index
    is first built) is a 503 naming it: the API's one place that names OpenSearch."""
    try:
        return backends.opensearch.search(
            mailbox, body, budget_ms=backends.settings.search_timeout_ms
        )
    except PoisonError as exc:  # the request, not the engine: a 400 (never "retry later")
        raise QueryError(0, str(exc)) from exc
    except TransientError as exc:
        raise BackendUnavailable("opensearch", str(exc)) from exc


def from_hit(hit: dict[str, Any]) -> Candidate:
    src = hit["_source"]
    inner = hit.get("inner_hits", {}).get("thread_hits", {}).get("hits", {}).get("total", {})
    return Candidate(
        message_key=src["message_key"],
        thread_key=src["thread_key"],
        ts=int(src["ts"]),
        score=float(hit.get("_score") or 0.0),
        highlights=_highlights(hit.get("highlight") or {}),
        thread_hits=inner.get("value"),
        sort=list(hit.get("sort", [])),
    )


def _highlights(raw: dict[str, list[str]]) -> dict[str, list[str]]:
    """One snippet list per field: a sub-field's variant when only it marks the match."""
    merged: dict[str, list[str]] = {}
    for name in ("subject", "clean"):
        variants = [raw.get(f"{name}{suffix}") for suffix in ("", ".exact", ".parts")]
        marked = [f for f in variants if f and any("<mark>" in x for x in f)]
        best = marked[0] if marked else next((f for f in variants if f), None)
        if best:
            merged[name] = best
    return merged


def fulltext(
    backends: Backends,
    mailbox: str,
    node: Node,
    *,
    size: int,
    by_date: bool,
    collapse: bool,
    search_after: list[Any] | None,
    offset: int,
    any_words: str | None = None,
    highlight: bool = True,
) -> list[Candidate]:
    """One page of full-text hits (with their snippets unless ``highlight`` is off)."""
    body = fulltext_body(
        mailbox,
        node,
        size=size,
        by_date=by_date,
        collapse=collapse,
        search_after=search_after,
        offset=offset,
        any_words=any_words,
        highlight=highlight,
    )
    return [from_hit(h) for h in os_search(backends, mailbox, body)]


def fulltext_body(
    mailbox: str,
    node: Node,
    *,
    size: int,
    by_date: bool,
    collapse: bool = False,
    search_after: list[Any] | None = None,
    offset: int = 0,
    any_words: str | None = None,
    highlight: bool = True,
) -> dict[str, Any]:
    """The search body, or :class:`QueryError` (too big: a 400 naming the limit) /
    :class:`CursorError` (a page the engine would refuse: a forged or stale cursor)."""
    try:
        return build_search_body(
            node,
            mailbox,
            size=size,
            sort_by_date=by_date,
            search_after=search_after,
            collapse_threads=collapse,
            offset=offset,
            any_words=any_words,
            highlight=highlight,
        )
    except QueryError:
        raise
    except ValueError as exc:
        raise CursorError(str(exc)) from exc


def highlight_page(backends: Backends, mailbox: str, node: Node, page: list[Candidate]) -> None:
    """Snippets for a page whose candidates were fetched without them (hybrid: its 100
    full-text candidates are not highlighted, only the page shown), in one request."""
    keys = [c.message_key for c in page]
    if not keys or not free_text(node).strip():
        return
    hits = os_search(backends, mailbox, page_highlight_body(node, mailbox, keys))
    found = {h["_source"]["message_key"]: _highlights(h.get("highlight") or {}) for h in hits}
    for c in page:
        c.highlights = found.get(c.message_key, c.highlights)


def _embed(backends: Backends, text: str) -> list[float]:
    """The query's vector, by the model of the collection searches read (its query prompt)."""
    return backends.embed_query(text)


def semantic(backends: Backends, mailbox: str, node: Node, depth: int = DEPTH) -> list[Candidate]:
    text = free_text(node)
    if not text.strip():
        return []
    backends.require_vectors()
    points = vector_search(backends, _embed(backends, text), vector_filter(node, mailbox), depth)
    return [from_point(p) for p in points]


def from_point(point: Any) -> Candidate:
    payload = point.payload or {}
    return Candidate(
        str(payload["message_key"]),
        str(payload["thread_key"]),
        int(payload["ts"]),
        float(point.score),
    )


def hybrid(
    backends: Backends, mailbox: str, node: Node, tuning: HybridTuning = HYBRID
) -> list[Candidate]:
    """Reciprocal rank fusion of the full-text and semantic rankings on message_key (see
    :data:`HYBRID`: the full-text leg needs only some of the free words). The full-text leg
    runs beside the semantic one (encode + vector search): the request waits for the slower."""
    # Built (and bounded) before anything runs: an over-limit query is a 400 at once, not
    # after the query was embedded.
    body = fulltext_body(
        mailbox, node, size=tuning.text_depth, by_date=False, any_words=tuning.any_words,
        highlight=False,
    )
    text_hits = backends.concurrently(os_search, backends, mailbox, body)
    vector_hits = semantic(backends, mailbox, node, tuning.vector_depth)
    return fuse([from_hit(h) for h in text_hits.result()], vector_hits, tuning)


def fuse(
    text_hits: list[Candidate], vector_hits: list[Candidate], tuning: HybridTuning = HYBRID
) -> list[Candidate]:
    """The fused ranking of both legs' candidates (each cut to its ``tuning`` depth)."""
    text_hits, vector_hits = text_hits[: tuning.text_depth], vector_hits[: tuning.vector_depth]
    by_key = {c.message_key: c for c in vector_hits} | {c.message_key: c for c in text_hits}
    fused = rrf(
        [[c.message_key for c in text_hits], [c.message_key for c in vector_hits]],
        k=tuning.k,
        weights=[tuning.text_weight, tuning.vector_weight],
    )
    return [rescored(copy.copy(by_key[key]), score) for key, score in fused]


def rescored(candidate: Candidate, score: float) -> Candidate:
    candidate.score = score
    return candidate


def collapse_threads(candidates: list[Candidate]) -> list[Candidate]:
    """Best-ranked candidate per thread, carrying the thread's number of hits."""
    best: dict[str, Candidate] = {}
    counts: dict[str, int] = {}
    for c in candidates:
        counts[c.thread_key] = counts.get(c.thread_key, 0) + 1
        best.setdefault(c.thread_key, c)
    for c in best.values():
        c.thread_hits = counts[c.thread_key]
    return list(best.values())


def join_rows(
    backends: Backends, mailbox: str, hits: list[Candidate]
) -> list[tuple[Candidate, dict[str, Any]]]:
    """Each hit with its hot Message row, rank order kept; vanished rows are dropped and their
    messages repaired (deleted from both indexes through the normal pipeline). The thread
    summaries come in the same BatchGetItem: their ``message_count`` is the hit's thread size."""
    keys = {
        c.message_key: (thread_pk(mailbox, c.thread_key), message_sk(c.ts, c.message_key))
        for c in hits
    }
    threads = {c.thread_key: (thread_pk(mailbox, c.thread_key), "THREAD") for c in hits}
    rows = backends.rows([*keys.values(), *threads.values()])
    joined = [
        (c, {**rows[keys[c.message_key]], THREAD_SIZE: _count(rows.get(threads[c.thread_key]))})
        for c in hits
        if keys[c.message_key] in rows
    ]
    gone = [MessageRef(mailbox, c.message_key) for c in hits if keys[c.message_key] not in rows]
    if gone:
        backends.repair(gone)
    return joined


def policy_scores(settings: Settings, ranked: list[Candidate], first_rank: int) -> list[float]:
    """The scores a response shows: by default ``1 / (1 + rank)`` (rank 0-based across pages).

    Every mailbox shares one index, so BM25 scores use every mailbox's term statistics: a raw
    score would move when *another* mailbox is indexed and tell how common a word is there.
    A rank-derived score carries only this response's order. ``SIDECAR_EXPOSE_SCORES=true``
    (a single-tenant deployment) returns the engines' raw scores instead.
    """
    if settings.expose_scores:
        return [c.score for c in ranked]
    return [1.0 / (1 + first_rank + i) for i in range(len(ranked))]


def _count(summary: dict[str, Any] | None) -> int | None:
    """A thread summary's ``message_count`` (None while the writer has not stored it)."""
    count = (summary or {}).get("message_count")
    return int(count) if count is not None else None


_NUMBERS = frozenset({"ts", "attachment_count", "size_bytes"})


def _shown(name: str, value: Any) -> str | int | None:
    """A hot row's field as the contract types it (:class:`search_api.models.Hit`: numbers,
    else strings); a malformed one (the writer's bug, not the caller's) is shown as null and
    counted, never a 500 for every page that holds the message."""
    if value is None or (isinstance(value, str) and name not in _NUMBERS):
        return value
    if name in _NUMBERS:
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            pass
    MALFORMED_FIELDS.labels(field=name).inc()
    return None


def render(
    candidate: Candidate, row: dict[str, Any], mode: str, score: float | None = None
) -> dict[str, Any]:
    """The API's hit: identity, score, highlights, and the hot row's fields (never bcc)."""
    hit: dict[str, Any] = {
        "message_key": candidate.message_key,
        "thread_key": candidate.thread_key,
        "score": candidate.score if score is None else score,
        "from": {
            "email": _shown("from_email", row.get("from_email") or None),
            "name": _shown("from_name", row.get("from_name")),
        },
    }
    for name in ROW_FIELDS:  # clean_fallback is a flag (1/0 in the row): any value is one
        value = row.get(name)
        hit[name] = bool(value) if name == "clean_fallback" else _shown(name, value)
    hit[THREAD_SIZE] = row.get(THREAD_SIZE)
    if mode == "fulltext" or candidate.highlights:
        hit["highlights"] = candidate.highlights or {}
    if candidate.thread_hits is not None:
        hit["thread_hits"] = candidate.thread_hits
    return hit
