"""The languages a mailbox's mail is in: which language fields a search of it asks.

Mapping v7 indexes a message's subject and body again in its detected language's fields
(``indexer/core/language.py``). Asking every language's pair would cost each free word two
engine clauses per language, counted by the clause bound and the expensive-search gate, for
fields that hold nothing in most mailboxes; a search asks only the languages its own mailbox
holds (:func:`search_api.query.clauses.in_languages`). An English-only mailbox is searched
exactly as before v7.

The set comes from one ``size: 0`` request under the mailbox filter (a ``terms``
aggregation of ``lang``, its values a fixed list of codes, never the caller's text), so it
depends on the caller's mailbox alone, and is kept :data:`TTL_S` per mailbox: mail in a
language new to the mailbox is searched in that language within that time. An index older
than v7 has no ``lang``: no language, as before. Asked from a thread that may block on it;
a failure answers no language (the search itself then tells what is wrong).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.core.errors import PoisonError, TransientError
from indexer.core.language import ANALYZERS, LANGUAGE_FIELD

log = logging.getLogger(__name__)
TTL_S = 30.0
MAX_MAILBOXES = 10_000  # the cache's bound (oldest answer dropped first)
NONE: frozenset[str] = frozenset()


def languages_body(mailbox_id: str) -> dict[str, Any]:
    """Which of the analyzed languages the mailbox's messages are in."""
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    return {
        "size": 0,
        "query": {"bool": {"filter": [{"term": {"mailbox_id": mailbox_id}}]}},
        "aggs": {"lang": {"terms": {"field": LANGUAGE_FIELD, "size": len(ANALYZERS),
                                    "include": sorted(ANALYZERS)}}},
    }


def read_languages(answer: dict[str, Any]) -> frozenset[str]:
    buckets = ((answer.get("aggregations") or {}).get("lang") or {}).get("buckets") or []
    return frozenset(str(b["key"]) for b in buckets if b.get("doc_count") and
                     str(b["key"]) in ANALYZERS)


class MailboxLanguages:
    """Each mailbox's languages, asked at most once per :data:`TTL_S`."""

    def __init__(self, index: Callable[[], OpenSearchIndex], budget_ms: int) -> None:
        self._index, self._budget_ms = index, budget_ms
        self._known: OrderedDict[str, tuple[float, frozenset[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, mailbox_id: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            known = self._known.get(mailbox_id)
        if known is not None and now - known[0] < TTL_S:
            return known[1]
        try:
            answer = self._index().search_response(
                mailbox_id, languages_body(mailbox_id), budget_ms=self._budget_ms)
        except (PoisonError, TransientError) as exc:
            log.info("mailbox languages unavailable, none asked: %s", type(exc).__name__)
            return NONE
        found = read_languages(answer)
        with self._lock:
            self._known[mailbox_id] = (now, found)
            self._known.move_to_end(mailbox_id)
            while len(self._known) > MAX_MAILBOXES:
                self._known.popitem(last=False)
        return found
