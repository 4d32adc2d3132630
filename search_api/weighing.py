"""Weigh a query's free words by their rarity within the caller's mailbox (one statistics
request; see :mod:`search_api.query.weights` for why the index itself cannot)."""

from __future__ import annotations

import logging

from indexer.core.errors import PoisonError, TransientError
from search_api.backends import Backends
from search_api.query import Node
from search_api.query.weights import stats_body, weighted, weights_from

log = logging.getLogger(__name__)


def mailbox_weighted(b: Backends, mailbox: str, node: Node) -> Node:
    """``node`` with its words weighed by the mailbox's own counts — or as it is when there
    is nothing to weigh or the counts could not be had (the search itself then tells)."""
    body = stats_body(node, mailbox)
    if body is None:
        return node
    try:
        answer = b.opensearch.search_response(
            mailbox, body, budget_ms=b.settings.search_timeout_ms
        )
    except (PoisonError, TransientError) as exc:
        log.info("word statistics unavailable, ranking unweighed: %s", type(exc).__name__)
        return node
    if "aggregations" not in answer:  # no index yet
        return node
    total = int(answer["hits"]["total"]["value"])
    return weighted(node, weights_from(node, total, answer["aggregations"]))
