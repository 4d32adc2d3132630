"""One search request, start to end: candidates, fusion, collapse, paging, cursors, snippets,
the join to the hot rows and the hits as the API shows them.

The route parses and authorises; everything a page is made of is decided here, in one pass
(full-text pages without collapse page with OpenSearch ``search_after``; semantic, hybrid
and collapsed pages through a bounded candidate list by offset — see :mod:`.service`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from search_api import cursor as cursors
from search_api import service
from search_api.backends import Backends
from search_api.models import SearchPage
from search_api.query import Node, sort_spec
from search_api.weighing import mailbox_weighted

Mode = Literal["fulltext", "semantic", "hybrid"]


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
    request_id = cursors.fingerprint(mailbox, req.q, req.mode, req.collapse, req.sort)
    if req.mode != "semantic" and req.sort == "relevance":  # the mailbox's own word counts
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
    if req.mode == "hybrid":
        service.highlight_page(b, mailbox, req.node, page)
    joined = service.join_rows(b, mailbox, page)
    scored = service.policy_scores(b.settings, [c for c, _ in joined], first_rank)
    return SearchPage.model_validate({
        "hits": [
            service.render(c, row, req.mode, s) for (c, row), s in zip(joined, scored, strict=True)
        ],
        "next_cursor": codec.encode(request_id, next_position) if next_position else None,
    })


def _after_page(
    b: Backends, mailbox: str, req: SearchRequest, position: dict[str, Any], first_rank: int
) -> tuple[list[service.Candidate], dict[str, Any] | None]:
    hits = service.fulltext(
        b,
        mailbox,
        req.node,
        size=req.limit + 1,
        by_date=req.sort == "date",
        collapse=False,
        search_after=position.get("a"),
        offset=0,
    )
    page, more = hits[: req.limit], len(hits) > req.limit
    return page, ({"a": page[-1].sort, "n": first_rank + len(page)} if more and page else None)


def _offset_page(
    b: Backends, mailbox: str, req: SearchRequest, offset: int
) -> tuple[list[service.Candidate], dict[str, Any] | None]:
    candidates = _candidates(b, mailbox, req, offset)
    page, more = candidates[: req.limit], len(candidates) > req.limit
    return page, ({"o": offset + req.limit} if more else None)


def _candidates(
    b: Backends, mailbox: str, req: SearchRequest, offset: int
) -> list[service.Candidate]:
    """The ranked list from ``offset`` on (at most ``limit + 1``), for offset-paged modes."""
    if req.mode == "fulltext":
        return service.fulltext(
            b,
            mailbox,
            req.node,
            size=req.limit + 1,
            by_date=req.sort == "date",
            collapse=req.collapse is not None,
            search_after=None,
            offset=offset,
        )
    ranked = (
        service.semantic(b, mailbox, req.node)
        if req.mode == "semantic"
        else service.hybrid(b, mailbox, req.node)
    )
    if req.collapse:
        ranked = service.collapse_threads(ranked)
    if req.sort == "date":
        ranked.sort(key=lambda c: (-c.ts, c.message_key))
    return ranked[offset : offset + req.limit + 1]
