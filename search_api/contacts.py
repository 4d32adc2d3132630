"""Contact autocomplete: the addresses one mailbox corresponds with, matched on a prefix.

Source: the contact summary (``<alias>-contacts``, :mod:`indexer.core.contacts`), one document
per address the mailbox's messages are From, To or Cc of (never Bcc: the index does not hold
it), with its exact message count, latest message time and the name in that message — kept by
the full-text workers in the batch that moved them. One search, routed to the mailbox's shard
and filtered on ``mailbox_id``: a few thousand small documents per mailbox instead of the
mailbox's messages, so the answer costs the same at 4,000 messages and at 100,000
(docs/quality.md#contacts-latency). No suggester and no term dictionary is read, so no other
mailbox's addresses can be offered.

What matches a prefix ``p`` (lower-cased, accents folded as the summary folds them):

- the address starts with ``p`` (``ra`` → ``ralf@linux-mips.org``);
- its domain, or the domain from one of its labels on, starts with ``p`` (``linux-m`` → the
  same, ``gitlab`` → ``digest@lists.gitlab.example``);
- every word of ``p`` starts a word of the contact's display name (``ralf baech``).

Each is one lookup of an indexed prefix (``index_prefixes``, 1–19 characters), never an
expansion over the shard's terms; ``p`` is a leaf value only.

Ranking, in the engine: ``log2(1 + messages)`` plus a recency bonus of 2 that halves every
:data:`HALF_LIFE_DAYS` (an exponential decay on ``last_ts``), then messages, recency, address.
"""

from __future__ import annotations

import math
import re
from typing import Any

from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.core.contacts import MAILBOX_FIELD, fold
from search_api.backends import Backends
from search_api.engine_errors import naming
from search_api.models import ContactsPage

HALF_LIFE_DAYS = 90
MAX_PREFIX = 100  # characters: an address is at most 254, a useful prefix far shorter
_WORD = re.compile(r"\w+")


def contacts_body(mailbox: str, prefix: str, limit: int) -> dict[str, Any]:
    """The one search (``prefix`` folded)."""
    should: list[dict[str, Any]] = [
        {"prefix": {"email.p": {"value": prefix}}},
        {"prefix": {"domains": {"value": prefix}}},
    ]
    words = _WORD.findall(prefix)
    if words:
        should.append({"bool": {"filter": [{"prefix": {"name": {"value": w}}} for w in words]}})
    matching = {"bool": {"filter": [
        {"term": {MAILBOX_FIELD: mailbox}},
        {"bool": {"should": should, "minimum_should_match": 1}},
    ]}}
    return {
        "size": limit,
        "track_total_hits": False,
        "_source": ["email", "name", "messages", "last_ts"],
        "query": {"function_score": {
            "query": matching,
            "functions": [
                {"field_value_factor": {"field": "messages", "modifier": "ln1p", "missing": 0},
                 "weight": 1 / math.log(2)},  # log2(1 + messages)
                {"exp": {"last_ts": {"origin": "now", "scale": f"{HALF_LIFE_DAYS}d",
                                     "decay": 0.5}},
                 "weight": 2},
            ],
            "score_mode": "sum",
            "boost_mode": "replace",
        }},
        "sort": ["_score", {"messages": "desc"}, {"last_ts": "desc"}, {"email": "asc"}],
    }


def contacts(b: Backends, mailbox: str, prefix: str, limit: int) -> ContactsPage:
    """The mailbox's correspondents matching ``prefix``, best first (at most ``limit``)."""
    folded = fold(prefix.strip())
    if not folded:
        return ContactsPage(contacts=[])
    with naming("opensearch"):
        answer = ContactsIndex(b.opensearch).search(
            mailbox, contacts_body(mailbox, folded, limit), b.settings.search_timeout_ms)
    shown = [
        {"email": s["email"], "name": s.get("name"), "messages": int(s["messages"]),
         "last_ts": int(s["last_ts"])}
        for s in (h["_source"] for h in answer["hits"]["hits"])
    ]
    return ContactsPage.model_validate({"contacts": shown})
