"""Candidates from the engines: one full-text page, one vector ranking, one page's snippets.

Each function asks one engine once and turns its answer into :class:`Candidate` rows; what a
page is made of (which legs, fusion, collapse, paging) is the search slice's
(:mod:`search_api.service`). A failure travels as the core's own error, named by the engine
door it passed (:mod:`search_api.backends`), to the app's one handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from search_api.backends import Backends
from search_api.cursor import CursorError
from search_api.query import (
    Node,
    QueryError,
    build_search_body,
    free_text,
    page_highlight_body,
    rrf,
    vector_filter,
)
from search_api.vector_search import search as vector_search


@dataclass
class Candidate:
    message_key: str
    thread_key: str
    ts: int
    score: float
    highlights: dict[str, list[str]] | None = None
    thread_hits: int | None = None
    sort: list[Any] = field(default_factory=list)


def fused(rankings: Sequence[Sequence[Candidate]], k: int,
          weights: Sequence[float]) -> list[Candidate]:
    """The one fusion of candidate rankings (hybrid's two legs, similar's three): RRF on
    ``message_key`` (:func:`search_api.query.fusion.rrf`), each candidate a copy carrying its
    fused score; a message in several rankings keeps the first ranking's candidate (its
    highlights, its sort values)."""
    by_key = {c.message_key: c for ranking in reversed(rankings) for c in ranking}
    order = rrf([[c.message_key for c in ranking] for ranking in rankings], k=k, weights=weights)
    return [replace(by_key[key], score=score) for key, score in order]


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
    :class:`CursorError` (a page the engine would refuse: a forged or stale cursor). Built,
    and so bounded, before any engine is asked."""
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


def fulltext(backends: Backends, mailbox: str, body: dict[str, Any]) -> list[Candidate]:
    """The hits of one search body (:func:`fulltext_body`), in the engine's order."""
    return [from_hit(h) for h in backends.text_search(mailbox, body)]


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


def highlight_page(backends: Backends, mailbox: str, node: Node, page: list[Candidate]) -> None:
    """Snippets for a page whose candidates were fetched without them (hybrid: its 100
    full-text candidates are not highlighted, only the page shown), in one request."""
    keys = [c.message_key for c in page]
    if not keys or not free_text(node).strip():
        return
    hits = backends.text_search(mailbox, page_highlight_body(node, mailbox, keys))
    found = {h["_source"]["message_key"]: _highlights(h.get("highlight") or {}) for h in hits}
    for c in page:
        c.highlights = found.get(c.message_key, c.highlights)


def semantic(backends: Backends, mailbox: str, node: Node, depth: int) -> list[Candidate]:
    """The nearest points to the query's free text, embedded by the model of the collection
    it is then searched in: both come from one resolution of the read alias (cached for a
    few seconds, see :meth:`Backends.read_target`). A query that fails on a cached
    collection (dropped, or the alias moved) forgets it and tries once with a fresh one."""
    text = free_text(node)
    if not text.strip():
        return []
    backends.require_vectors()
    flt = vector_filter(node, mailbox)
    for fresh in (False, True):
        target = backends.encoder.read_target(fresh=fresh)
        try:
            vector = backends.encoder.embed_query(text, target)
            return [from_point(p) for p in vector_search(backends, vector, flt, depth, target)]
        except Exception:
            backends.encoder.forget_read_target(target)
            if fresh or not target.cached:
                raise
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def from_point(point: Any) -> Candidate:
    payload = point.payload or {}
    return Candidate(
        str(payload["message_key"]),
        str(payload["thread_key"]),
        int(payload["ts"]),
        float(point.score),
    )

