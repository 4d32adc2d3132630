"""Contact autocomplete: the addresses one mailbox corresponds with, matched on a prefix.

Source: the full-text index, one ``size: 0`` request routed to the mailbox's shard and
filtered on ``mailbox_id``, whose aggregations count only that mailbox's messages (never a
suggester nor the shard's term dictionary, which hold every tenant's words: invariant 6 of the
design). The index holds From, To and Cc (never Bcc: the indexer leaves it out), lower-cased
and accent-folded as keywords (mapping v5: ``from.address``, ``to``, ``cc``). Why not the
table: its participant items are keyed by address (``M#<M>#A#<email>``), so "addresses that
start with ``ra``" has no key there, only a Scan.

What matches a prefix ``p`` (lower-cased, accents folded as the index folds them):

- the address starts with ``p`` (``ra`` → ``ralf@linux-mips.org``);
- its domain, or one of the domain's labels, starts with ``p`` (``linux-m`` → the same,
  ``github`` → ``noreply@github.com`` and ``x@lists.github.com``);
- a word of the contact's display name starts with ``p`` (every word of a multi-word ``p``
  must start a name word).

The address rules are exact within the engine: each role's ``terms`` aggregation keeps only
the keys its ``include`` pattern admits (the prefix escaped character by character, a leaf
value, never a pattern of the user's making). Names: the index keeps a message's To and Cc
names as a set beside the addresses, unpaired, so a name match there only proposes
candidates; each candidate's name is read from the sidecar's participant item of the
message it last appeared in (one ``BatchGetItem`` per answer) and checked.

Ranking: how often (``messages``: the messages it appears in as From, To or Cc — a message
naming it twice counts twice) and how recently (``last_ts``): ``log2(1 + messages)`` plus a
recency bonus of 2 halving every :data:`HALF_LIFE_DAYS`, so a frequent old correspondent
still ranks, and an active one outranks an equally frequent stale one.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from indexer.adapters import aws
from indexer.adapters.participants import ParticipantStore
from indexer.core.documents import Participant
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.backends import Backends, naming
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


def address_matches(email: str, prefix: str) -> bool:
    """The Python twin of :func:`include_pattern` (a name-proposed candidate may match)."""
    if email.startswith(prefix):
        return True
    domain = email.rpartition("@")[2] if "@" in email else ""
    labels = domain.split(".")
    return any(".".join(labels[i:]).startswith(prefix) for i in range(len(labels)))


def name_matches(name: str | None, words: list[str]) -> bool:
    """Every word of the prefix starts some word of the name (folded)."""
    if not name or not words:
        return False
    found = _WORD.findall(fold(name))
    return all(any(w.startswith(q) for w in found) for q in words)


def contacts_body(mailbox: str, prefix: str, limit: int) -> dict[str, Any]:
    """The one aggregation request (no hits) of a contacts answer; ``prefix`` folded."""
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
                ]
            }
        },
        "aggs": aggs,
    }


def _terms(address_field: str, size: int, include: str | None) -> dict[str, Any]:
    """Addresses by messages, each with its latest appearance (``map``: the values of the
    mailbox's matching messages only, no shard-wide ordinals)."""
    terms: dict[str, Any] = {"field": address_field, "size": size, "execution_hint": "map"}
    if include is not None:
        terms["include"] = include
    return {
        "terms": terms,
        "aggs": {
            "last": {
                "top_hits": {
                    "size": 1,
                    "sort": [{"ts": {"order": "desc"}}],
                    "_source": {"includes": ["message_key", "ts", "from.name"]},
                }
            }
        },
    }


@dataclass
class _Candidate:
    email: str
    messages: int = 0
    last_ts: int = 0
    last_key: str = ""  # the message it last appeared in, and as what
    last_role: str = ""
    name: str | None = None  # known from a From (the index pairs a sender's name)
    sure: bool = False  # matched by address, or by its own From name
    roles: set[str] = field(default_factory=set)

    def add(self, role: str, bucket: Mapping[str, Any]) -> None:
        self.messages += int(bucket["doc_count"])
        self.roles.add(role)
        top = bucket["last"]["hits"]["hits"]
        source = top[0]["_source"] if top else {}
        ts = int(source.get("ts") or 0)
        if ts >= self.last_ts:
            self.last_ts, self.last_key, self.last_role = ts, str(source["message_key"]), role
        if role == "from" and self.name is None:
            sender = source.get("from") or {}
            self.name = sender.get("name") or None

    def score(self, now: float) -> float:
        age_days = max(0.0, now - self.last_ts) / 86400.0
        recency: float = 0.5 ** (age_days / HALF_LIFE_DAYS)
        return math.log2(1 + self.messages) + 2.0 * recency


def candidates(
    answer: Mapping[str, Any], prefix: str
) -> dict[str, _Candidate]:
    """Every proposed contact with its counts, from the aggregations' answer."""
    words = _WORD.findall(prefix)
    aggs = answer.get("aggregations") or {}
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
            c = found.setdefault(key, _Candidate(key))
            c.add(role, bucket)
    for c in found.values():
        if not c.sure and c.name is not None and name_matches(c.name, words):
            c.sure = True
    return found


@lru_cache(maxsize=4)
def _people(settings: Settings) -> ParticipantStore:
    """The sidecar's per-message participant items (their names, paired with addresses)."""
    return ParticipantStore(aws.client(settings, "dynamodb"), settings.resolved_state_table)


def _names(
    b: Backends, mailbox: str, wanted: list[_Candidate]
) -> dict[str, str | None]:
    """Each candidate's name in the message it last appeared in (never a Bcc entry)."""
    refs = {c.email: MessageRef(mailbox, c.last_key) for c in wanted if c.last_key}
    if not refs:
        return {}
    with naming("dynamodb"):
        stored = _people(b.settings).of_many(list(set(refs.values())))
    names: dict[str, str | None] = {}
    for email, ref in refs.items():
        people: tuple[Participant, ...] = stored.get(ref, ())
        names[email] = next(
            (p.name for p in people
             if p.role in ROLES and fold(p.email) == email and p.name),
            None,
        )
    return names


def contacts(b: Backends, mailbox: str, prefix: str, limit: int) -> ContactsPage:
    """The mailbox's correspondents matching ``prefix``, best first (at most ``limit``)."""
    folded = fold(prefix.strip())
    if not folded:
        return ContactsPage(contacts=[])
    with naming("opensearch"):
        answer = b.opensearch.search_response(
            mailbox, contacts_body(mailbox, folded, limit),
            budget_ms=b.settings.search_timeout_ms,
        )
    now = time.time()
    ranked = sorted(
        candidates(answer, folded).values(),
        key=lambda c: (-c.score(now), -c.messages, -c.last_ts, c.email),
    )
    # Read names for the sure ones shown and for the unsure ones before the cut (whose name
    # decides whether they are shown at all), in one request.
    window: list[_Candidate] = []
    sure = 0
    for c in ranked:
        if sure >= limit:
            break
        window.append(c)
        sure += c.sure
    looked_up = _names(b, mailbox, [c for c in window if c.name is None])
    words = _WORD.findall(folded)
    shown = []
    for c in window:
        name = c.name if c.name is not None else looked_up.get(c.email)
        if not c.sure and not (name_matches(name, words) or address_matches(c.email, folded)):
            continue
        shown.append({"email": c.email, "name": name, "messages": c.messages,
                      "last_ts": c.last_ts})
    return ContactsPage.model_validate({"contacts": shown[:limit]})
