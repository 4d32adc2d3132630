"""The search slice: one request, start to end — the mailbox's word weights, the cursor, the
candidates of each leg, fusion, collapse, paging, the page's snippets, the join to the hot
rows, and the hits and next cursor as the API shows them.

The route parses, authorises and renders; everything a page is made of is decided here, in
one pass, top to bottom. Below it: :mod:`.candidates` asks the engines, :mod:`.hits` joins and
renders, :mod:`.backends` is the door every engine call passes.

Paging: full-text pages without collapse page with OpenSearch ``search_after`` (stable, no
deep offsets) where their sort values may travel in the cursor; semantic, hybrid and
collapsed pages through a bounded candidate list (``DEPTH``) by offset; the cursor says
where, and the list is recomputed deterministically per request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from indexer.core.items import message_pk
from indexer.core.plan import MessageRef
from search_api import candidates as legs
from search_api import cursor as cursors
from search_api import hits, suggest
from search_api.backends import Backends
from search_api.candidates import Candidate
from search_api.models import SearchPage, SimilarPage
from search_api.query import HybridTuning, Node, QueryError, sort_spec
from search_api.query.clauses import PREFIX_FIELDS_VERSION, expands_a_phrase_prefix
from search_api.similar import similar
from search_api.vector_search import own_point
from search_api.weighing import mailbox_weighted

Mode = Literal["fulltext", "semantic", "hybrid"]
MODES: frozenset[str] = frozenset(get_args(Mode))  # the one list of search modes
DEPTH = 200  # candidates per engine for semantic / collapsed pages
# Hybrid search as shipped, tuned on the semantic query set's tune half (`sidecar eval
# --semantic --tune`, docs/quality.md): any one free word admits a full-text candidate, and the
# full-text ranking weighs a quarter of the semantic one; 100 candidates from each leg.
HYBRID = HybridTuning(
    k=60, text_weight=0.25, vector_weight=1.0, text_depth=100, vector_depth=100, any_words="1"
)


class NotFound(LookupError):
    """What the request names is not in the caller's mailbox (the app answers 404)."""


@dataclass(frozen=True)
class SearchRequest:
    """What the caller asked for (``q`` already parsed into ``node``)."""

    q: str
    node: Node
    mode: Mode = "fulltext"
    limit: int = 20
    cursor: str | None = None
    collapse: Literal["thread"] | None = None
    sort: Literal["relevance", "date"] = "relevance"


def search(
    b: Backends, codec: cursors.CursorCodec, mailbox: str, req: SearchRequest
) -> SearchPage:
    """The page of hits and the cursor of the next one (None on the last page)."""
    if (req.mode != "semantic" and expands_a_phrase_prefix(req.node)
            and not b.mapping.prefix_fields_indexed()):
        raise QueryError(0, "a phrase prefix of several words needs the index's mapping "
                         f"v{PREFIX_FIELDS_VERSION} (an older one would expand its last word "
                         "from every mailbox's words): quote fewer words, or ask the operator "
                         "to run `sidecar reindex`")
    request_id = cursors.fingerprint(mailbox, req.q, req.mode, req.collapse, req.sort)
    # "Did you mean" (first page of full text or hybrid) runs beside the search (suggest.py).
    suggested = (b.concurrently(suggest.did_you_mean, b, mailbox, req.q, req.node)
                 if req.mode != "semantic" and req.cursor is None else None)
    if req.mode == "fulltext" and req.sort == "relevance":  # the mailbox's own word counts
        req = replace(req, node=mailbox_weighted(b, mailbox, req.node))
    # search_after pages carry their sort values in the cursor: only where they hold no
    # engine score (date order), or where scores may be shown (see the score policy).
    paged_after = (
        req.mode == "fulltext"
        and req.collapse is None
        and (req.sort == "date" or b.settings.expose_scores)
    )
    sort_keys = len(sort_spec(sort_by_date=req.sort == "date")) if paged_after else None
    position = codec.decode(req.cursor, request_id, sort_keys=sort_keys) if req.cursor else {}
    first_rank = int(position.get("n", position.get("o", 0)))
    if paged_after:
        page, next_position = _after_page(b, mailbox, req, position, first_rank)
    else:
        page, next_position = _offset_page(b, mailbox, req, int(position.get("o", 0)))
    if req.mode == "hybrid":  # its candidates came without snippets: only the page gets them
        legs.highlight_page(b, mailbox, req.node, page)
    joined, _ = hits.join_rows(b, mailbox, page)
    answer: dict[str, Any] = {
        "hits": hits.shown(b.settings, joined, req.mode, first_rank),
        "next_cursor": codec.encode(request_id, next_position) if next_position else None,
    }
    if suggested is not None:
        answer["did_you_mean"] = suggested.result()
    return SearchPage.model_validate(answer)


def _after_page(
    b: Backends, mailbox: str, req: SearchRequest, position: dict[str, Any], first_rank: int
) -> tuple[list[Candidate], dict[str, Any] | None]:
    body = legs.fulltext_body(
        mailbox, req.node, size=req.limit + 1, by_date=req.sort == "date",
        search_after=position.get("a"),
    )
    found = legs.fulltext(b, mailbox, body)
    page, more = found[: req.limit], len(found) > req.limit
    return page, ({"a": page[-1].sort, "n": first_rank + len(page)} if more and page else None)


def _offset_page(
    b: Backends, mailbox: str, req: SearchRequest, offset: int
) -> tuple[list[Candidate], dict[str, Any] | None]:
    ranked = _candidates(b, mailbox, req, offset)
    page, more = ranked[: req.limit], len(ranked) > req.limit
    return page, ({"o": offset + req.limit} if more else None)


def _candidates(b: Backends, mailbox: str, req: SearchRequest, offset: int) -> list[Candidate]:
    """The ranked list from ``offset`` on (at most ``limit + 1``), for offset-paged modes."""
    if req.mode == "fulltext":
        body = legs.fulltext_body(
            mailbox, req.node, size=req.limit + 1, by_date=req.sort == "date",
            collapse=req.collapse is not None, offset=offset,
        )
        return legs.fulltext(b, mailbox, body)
    ranked = (
        legs.semantic(b, mailbox, req.node, DEPTH)
        if req.mode == "semantic"
        else hybrid(b, mailbox, req.node, weigh=req.sort == "relevance")
    )
    if req.collapse:
        ranked = collapse_threads(ranked)
    if req.sort == "date":
        ranked.sort(key=lambda c: (-c.ts, c.message_key))
    return ranked[offset : offset + req.limit + 1]


def hybrid(
    b: Backends, mailbox: str, node: Node, tuning: HybridTuning = HYBRID, *, weigh: bool = True
) -> list[Candidate]:
    """Reciprocal rank fusion of the full-text and semantic rankings on message_key (see
    :data:`HYBRID`: the full-text leg needs only some of the free words, and fetches no
    snippets); ``weigh``: the full-text leg's words weighed by the mailbox's own counts, as
    in full-text mode (relevance order).

    The semantic leg (encode + vector search) runs beside the whole full-text leg, the
    word statistics request included: in a 100,000-message mailbox that request alone takes
    the engine ~30 ms, as long as the semantic leg
    (docs/results/runs/2026-12-05-tenants-whale-200k.md). The request waits for the slower."""
    def body(words: Node) -> dict[str, Any]:
        return legs.fulltext_body(mailbox, words, size=tuning.text_depth, by_date=False,
                                  any_words=tuning.any_words, highlight=False)

    # Built (and bounded) before anything runs: an over-limit query is a 400 at once, not
    # after the query was embedded. Weighing changes boosts only, never the bound.
    body(node)
    vector_hits = b.concurrently(legs.semantic, b, mailbox, node, tuning.vector_depth)
    weighed = mailbox_weighted(b, mailbox, node) if weigh else node
    text_hits = legs.fulltext(b, mailbox, body(weighed))
    return fuse(text_hits, vector_hits.result(), tuning)


def fuse(
    text_hits: list[Candidate], vector_hits: list[Candidate], tuning: HybridTuning = HYBRID
) -> list[Candidate]:
    """The fused ranking of both legs' candidates (each cut to its ``tuning`` depth); a
    message in both keeps its full-text candidate (its highlights)."""
    return legs.fused([text_hits[: tuning.text_depth], vector_hits[: tuning.vector_depth]],
                      tuning.k, [tuning.text_weight, tuning.vector_weight])


def collapse_threads(ranked: list[Candidate]) -> list[Candidate]:
    """Best-ranked candidate per thread, carrying the thread's number of hits."""
    best: dict[str, Candidate] = {}
    counts: dict[str, int] = {}
    for c in ranked:
        counts[c.thread_key] = counts.get(c.thread_key, 0) + 1
        best.setdefault(c.thread_key, c)
    for c in best.values():
        c.thread_hits = counts[c.thread_key]
    return list(best.values())


def similar_page(
    b: Backends, mailbox: str, message_key: str, *, limit: int, exclude_thread: bool
) -> SimilarPage:
    """The messages most like a stored one (never itself; by default never its thread).

    The message's own point names its thread and row (payload ``thread_key``, ``ts``), so
    its row is read in the page's join — one BatchGetItem, not a META read before it; only
    a message without a point (no vector) reads its META item first. A message whose row is
    gone is :class:`NotFound`, whatever its point says."""
    ref = MessageRef(mailbox, message_key)
    point = own_point(b, ref)
    payload = dict(point.payload) if point is not None else _meta(b, ref)
    if payload is None:
        raise NotFound("no such message in this mailbox")
    thread_key, ts = str(payload["thread_key"]), int(payload["ts"])
    own_row = hits.row_key(mailbox, thread_key, ts, message_key)
    ranked = similar(b, ref, point, limit=limit,
                     exclude_thread=thread_key if exclude_thread else None)
    joined, found = hits.join_rows(b, mailbox, ranked, also=[own_row])
    if own_row not in found:
        raise NotFound("no such message in this mailbox")
    return SimilarPage.model_validate({"hits": hits.shown(b.settings, joined, "semantic")})


def _meta(b: Backends, ref: MessageRef) -> dict[str, Any] | None:
    """The message's META pointer item (it names the thread and ts), or None."""
    key = (message_pk(ref.mailbox_id, ref.message_key), "META")
    return hits.read_rows(b, [key]).get(key)
