"""Contact autocomplete: the addresses one mailbox corresponds with, matched on a prefix.

Source: the full-text index, ``size: 0`` requests routed to the mailbox's shard and filtered
on ``mailbox_id``, whose aggregations count only that mailbox's messages (never a suggester
nor the shard's term dictionary, which hold every tenant's words: invariant 6 of the design).
The index holds From, To and Cc (never Bcc: the indexer leaves it out), lower-cased and
accent-folded as keywords (``from.address``, ``to``, ``cc``). Why not the table: its
participant items are keyed by address (``M#<M>#A#<email>``), so "addresses that start with
``ra``" has no key there, only a Scan.

What matches a prefix ``p`` (lower-cased, accents folded as the index folds them):

- the address starts with ``p`` (``ra`` → ``ralf@linux-mips.org``);
- its domain, or one of the domain's labels, starts with ``p`` (``linux-m`` → the same,
  ``github`` → ``noreply@github.com`` and ``x@lists.github.com``);
- a word of the contact's display name starts with ``p`` (every word of a multi-word ``p``
  must start a name word).

Two requests. **Propose**: the :data:`SAMPLE` most recent matching messages (all of them
when fewer match: a short prefix of a large mailbox costs no more than a long one) are
aggregated per role; the address rules are exact within the engine, each ``terms``
aggregation keeping only the keys its ``include`` pattern admits (the prefix escaped
character by character, a leaf value, never a pattern of the user's making). **Count**: the
best proposals' exact message counts over the whole mailbox (``filters`` of ``term``
queries: each message once, whatever role); their latest message (key and time from doc
values) comes from the sample, which holds it.

Names: the index keeps a message's To and Cc names as a set beside the addresses, unpaired,
so a name match only proposes candidates; each one's name is read from the sidecar's
participant item of the message it last appeared in (one ``BatchGetItem``, then cached:
a message's participants are never rewritten) and checked.

Ranking: how often (``messages``) and how recently (``last_ts``): ``log2(1 + messages)``
plus a recency bonus of 2 halving every :data:`HALF_LIFE_DAYS`, so a frequent old
correspondent still ranks, and an active one outranks an equally frequent stale one.
"""

from __future__ import annotations

import math
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.participants import ParticipantStore
from indexer.core.documents import Participant
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.backends import Backends
from search_api.engine_errors import naming
from search_api.models import ContactsPage

MAILBOX_FIELD = "mailbox_id"
# role -> (keyword field of its addresses, text field of its display names)
ROLES: dict[str, tuple[str, str]] = {
    "from": ("from.address", "from.name"),
    "to": ("to", "to_names"),
    "cc": ("cc", "cc_names"),
}
HALF_LIFE_DAYS = 90.0
MAX_PREFIX = 100  # characters: an address is at most 254, a useful prefix far shorter
BUCKETS_PER_LIMIT = 3  # candidates each aggregation returns per contact asked for
MAX_BUCKETS = 100
EXECUTION_HINT = "global_ordinals"  # measured against "map": docs/quality.md
NAME_CACHE_SIZE = 100_000  # (mailbox, message, address) -> name entries kept per process
SAMPLE = 2_000  # most recent matching messages whose addresses propose contacts
MAX_CHECKED = 3  # proposals whose exact figures are read, per contact asked for
# What the ``address`` analyzer splits an address on (mapping v5 ``address_parts``).
_ADDRESS_SPLIT = re.compile(r"[^\w+-]+")
_WORD = re.compile(r"\w+")


def fold(text: str) -> str:
    """Lower-cased with accents removed: how the index's ``lower`` normalizer and the name
    analyzer (``lowercase``, ``asciifolding``) store what the prefix is compared with."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _escaped(text: str) -> str:
    """``text`` as a literal of Lucene's regular-expression syntax: every character that is
    not a letter or a digit escaped, so no character of the user's can be an operator."""
    return "".join(c if c.isalnum() else "\\" + c for c in text)


def include_pattern(prefix: str) -> str:
    """The terms aggregations' ``include``: addresses that start with ``prefix``, or whose
    domain or one of its labels does."""
    e = _escaped(prefix)
    return f"{e}.*|[^@]*@([^@]*\\.)?{e}.*"


def name_matches(name: str | None, words: list[str]) -> bool:
    """Every word of the prefix starts some word of the name (folded)."""
    if not name or not words:
        return False
    found = _WORD.findall(fold(name))
    return all(any(w.startswith(q) for w in found) for q in words)


def contacts_body(mailbox: str, prefix: str, limit: int) -> dict[str, Any]:
    """Step 1, proposing contacts (``prefix`` folded): the aggregations read the
    :data:`SAMPLE` most recent matching messages of the mailbox (all of them when fewer
    match), so the cost does not grow with the mailbox."""
    size = min(MAX_BUCKETS, limit * BUCKETS_PER_LIMIT)
    include = include_pattern(prefix)
    first_part = next(iter(p for p in _ADDRESS_SPLIT.split(prefix) if p), "")
    words = _WORD.findall(prefix)
    should: list[dict[str, Any]] = []
    aggs: dict[str, Any] = {}
    for role, (address_field, names_field) in ROLES.items():
        should.append({"prefix": {address_field: {"value": prefix}}})
        if first_part:  # a domain or one of its labels (a superset: `include` is exact)
            should.append({"prefix": {f"{address_field}.parts": {"value": first_part}}})
        aggs[f"a_{role}"] = _terms(address_field, size, include)
        if words:
            named = [{"prefix": {names_field: {"value": w}}} for w in words]
            should.append({"bool": {"filter": named}})
            aggs[f"n_{role}"] = {
                "filter": {"bool": {"filter": named}},
                "aggs": {"c": _terms(address_field, size, None)},
            }
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "filter": [
                    {"term": {MAILBOX_FIELD: mailbox}},
                    {"bool": {"should": should, "minimum_should_match": 1}},
                ],
                # the score is only the recency the sampler keeps the newest messages by
                "should": [{"distance_feature": {"field": "ts", "origin": "now",
                                                 "pivot": f"{int(HALF_LIFE_DAYS)}d"}}],
            }
        },
        "aggs": {"s": {"sampler": {"shard_size": SAMPLE}, "aggs": aggs}},
    }


def _terms(address_field: str, size: int, include: str | None) -> dict[str, Any]:
    """Addresses by messages (of the sample), each with its latest appearance."""
    terms: dict[str, Any] = {"field": address_field, "size": size,
                             "execution_hint": EXECUTION_HINT}
    if include is not None:
        terms["include"] = include
    return {"terms": terms, "aggs": {"last": _LATEST}}


# A bucket's latest message: key and time from doc values (no ``_source``, which holds the
# body). The sample is the newest matching messages, so a proposed address's latest message
# in the sample is its latest in the mailbox.
_LATEST = {"top_hits": {
    "size": 1,
    "sort": [{"ts": {"order": "desc"}}],
    "_source": False,
    "docvalue_fields": ["message_key", {"field": "ts", "format": "epoch_second"}],
}}


def counts_body(mailbox: str, emails: list[str]) -> dict[str, Any]:
    """Step 2, the proposed contacts' exact counts in the whole mailbox: per address, the
    messages it is From, To or Cc of (each message once)."""
    filters = {
        f"c{i}": {"bool": {"should": [{"term": {f: e}} for f, _ in ROLES.values()],
                           "minimum_should_match": 1}}
        for i, e in enumerate(emails)
    }
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {"bool": {"filter": [{"term": {MAILBOX_FIELD: mailbox}}]}},
        "aggs": {"c": {"filters": {"filters": filters}}},
    }


@dataclass
class _Candidate:
    email: str
    messages: int = 0
    last_ts: int = 0
    last_key: str = ""  # the message it last appeared in (its name is read from there)
    sure: bool = False  # matched by address (a name match is checked against its name)
    roles: set[str] = field(default_factory=set)

    def add(self, role: str, bucket: Mapping[str, Any]) -> None:
        self.messages += int(bucket["doc_count"])
        self.roles.add(role)
        top = bucket["last"]["hits"]["hits"]
        values = top[0].get("fields", {}) if top else {}
        ts = int(float((values.get("ts") or ["0"])[0]))
        if ts >= self.last_ts and values.get("message_key"):
            self.last_ts, self.last_key = ts, str(values["message_key"][0])

    def score(self, now: float) -> float:
        age_days = max(0.0, now - self.last_ts) / 86400.0
        recency: float = 0.5 ** (age_days / HALF_LIFE_DAYS)
        return math.log2(1 + self.messages) + 2.0 * recency


def candidates(answer: Mapping[str, Any]) -> dict[str, _Candidate]:
    """Every proposed contact with its counts in the sample, from step 1's answer."""
    aggs = (answer.get("aggregations") or {}).get("s") or {}
    found: dict[str, _Candidate] = {}
    for role in ROLES:
        for bucket in (aggs.get(f"a_{role}") or {}).get("buckets", []):
            c = found.setdefault(bucket["key"], _Candidate(bucket["key"]))
            c.add(role, bucket)
            c.sure = True
    for role in ROLES:
        named = ((aggs.get(f"n_{role}") or {}).get("c") or {}).get("buckets", [])
        for bucket in named:
            key = bucket["key"]
            if key in found and role in found[key].roles:
                continue  # counted by address already
            found.setdefault(key, _Candidate(key)).add(role, bucket)
    return found


@lru_cache(maxsize=4)
def _people(settings: Settings) -> ParticipantStore:
    """The sidecar's per-message participant items (their names, paired with addresses)."""
    return ParticipantStore(aws.client(settings, "dynamodb"), settings.resolved_state_table)


class _NameCache:
    """Names by (mailbox, message, address): a message's participants are written with it
    and never rewritten (store-items.md), so an entry stays true; least recently used out."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._known: OrderedDict[tuple[str, str, str], str | None] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[bool, str | None]:
        with self._lock:
            if key not in self._known:
                return False, None
            self._known.move_to_end(key)
            return True, self._known[key]

    def put(self, key: tuple[str, str, str], name: str | None) -> None:
        with self._lock:
            self._known[key] = name
            self._known.move_to_end(key)
            while len(self._known) > self._size:
                self._known.popitem(last=False)


NAMES = _NameCache(NAME_CACHE_SIZE)


def _names(b: Backends, mailbox: str, wanted: list[_Candidate]) -> dict[str, str | None]:
    """Each candidate's name in the message it last appeared in (never a Bcc entry): from
    the cache, the rest in one ``BatchGetItem`` of the sidecar's participant items."""
    names: dict[str, str | None] = {}
    missing: dict[str, MessageRef] = {}
    for c in wanted:
        if not c.last_key:
            continue
        known, name = NAMES.get((mailbox, c.last_key, c.email))
        if known:
            names[c.email] = name
        else:
            missing[c.email] = MessageRef(mailbox, c.last_key)
    if not missing:
        return names
    with naming("dynamodb"):
        stored = _people(b.settings).of_many(list(set(missing.values())))
    for email, ref in missing.items():
        people: tuple[Participant, ...] = stored.get(ref, ())
        name = next((p.name for p in people
                     if p.role in ROLES and fold(p.email) == email and p.name), None)
        if ref in stored:  # a message not (yet) in the store is asked again next time
            NAMES.put((mailbox, ref.message_key, email), name)
        names[email] = name
    return names


def _ranked(found: list[_Candidate]) -> list[_Candidate]:
    now = time.time()
    return sorted(found, key=lambda c: (-c.score(now), -c.messages, -c.last_ts, c.email))


def contacts(b: Backends, mailbox: str, prefix: str, limit: int) -> ContactsPage:
    """The mailbox's correspondents matching ``prefix``, best first (at most ``limit``)."""
    folded = fold(prefix.strip())
    if not folded:
        return ContactsPage(contacts=[])
    proposed = _ranked(list(candidates(_ask(b, mailbox, contacts_body(mailbox, folded,
                                                                       limit))).values()))
    # The exact figures of the best proposals: every sure one shown, and the name-proposed
    # ones among them (their name decides whether they are shown at all).
    window: list[_Candidate] = []
    sure = 0
    for c in proposed:
        if sure >= limit or len(window) >= MAX_CHECKED * limit:
            break
        window.append(c)
        sure += c.sure
    if not window:
        return ContactsPage(contacts=[])
    # The names (their messages came with the proposals) are read beside the counts.
    named = b.concurrently(_names, b, mailbox, window)
    answer = _ask(b, mailbox, counts_body(mailbox, [c.email for c in window]))
    buckets = ((answer.get("aggregations") or {}).get("c") or {}).get("buckets", {})
    for i, c in enumerate(window):
        c.messages = int((buckets.get(f"c{i}") or {}).get("doc_count", 0))
    names = named.result()
    words = _WORD.findall(folded)
    shown = [
        {"email": c.email, "name": names.get(c.email), "messages": c.messages,
         "last_ts": c.last_ts}
        for c in _ranked(window)
        if c.messages and (c.sure or name_matches(names.get(c.email), words))
    ]
    return ContactsPage.model_validate({"contacts": shown[:limit]})


def _ask(b: Backends, mailbox: str, body: dict[str, Any]) -> dict[str, Any]:
    with naming("opensearch"):
        return b.opensearch.search_response(mailbox, body, budget_ms=b.settings.search_timeout_ms)
