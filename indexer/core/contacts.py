"""The contact summary: one document per (mailbox, address) the mailbox corresponds with.

Why a summary kept at index time: the contacts endpoint must answer in milliseconds on a
mailbox of 100,000 messages, ranked by each address's exact message count and latest
message. Counting those at request time (aggregations over the messages that match a
prefix: a mailing-list address is in nearly every one) took 0.5–0.9 s at the p99
(docs/quality.md); a summary holds a few thousand small documents per mailbox instead.

Why recomputed, never incremented: the pipeline is order-free and duplicate-safe (records
are triggers). A counter bumped once per delivered message would count a redelivery twice
and could not forget a delete it never saw. Each touched address's figures are instead read
again from the full-text index — the messages the address is From, To or Cc of, under the
mailbox filter (each message once), and the newest of them — and written whole; a write is
followed by a second read and repeated while they differ (as the full-text sync does), so
concurrent workers converge to the index. Bcc never counts: the index does not hold it.

What is stored per contact (all folded as the index's ``lower`` normalizer folds):
``email``; ``domains`` (the domain and every suffix of it that starts at a label, for
``gitlab`` to find ``lists.gitlab.example``); ``name`` (in the address's latest message,
from the sidecar's participant items); ``messages``; ``last_ts``; ``last_key``.

Pure: request bodies and documents only; the adapters send them.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from indexer.core.documents import Participant

MAILBOX_FIELD = "mailbox_id"
ADDRESS_FIELDS = ("from.address", "to", "cc")  # the roles counted; bcc is never indexed
ROLES = ("from", "to", "cc")


def fold(text: str) -> str:
    """Lower-cased, accents removed: what the index's ``lower`` normalizer and the name
    analyzer (``lowercase``, ``asciifolding``) make of a value."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def contact_id(mailbox: str, email: str) -> str:
    """The document id: a digest, so neither the mailbox nor the address becomes a key."""
    return hashlib.sha256(f"{mailbox}\x00{email}".encode()).hexdigest()


def addresses_of(doc: Mapping[str, Any] | None) -> set[str]:
    """The folded From, To and Cc addresses of a full-text document (or of its
    ``_source`` filtered to those fields)."""
    if not doc:
        return set()
    sender = (doc.get("from") or {}).get("address")
    found = [sender] if sender else []
    for role in ("to", "cc"):
        found.extend(a for a in doc.get(role) or [] if a)
    return {fold(str(a)) for a in found}


def domains(email: str) -> list[str]:
    """``a@lists.gitlab.example`` → ``lists.gitlab.example``, ``gitlab.example``, ``example``."""
    _, at, domain = email.rpartition("@")
    if not at or not domain:
        return []
    labels = domain.split(".")
    return [".".join(labels[i:]) for i in range(len(labels)) if labels[i]]


@dataclass(frozen=True, slots=True)
class Tally:
    """An address's figures in one mailbox, as the full-text index holds them now."""

    messages: int
    last_ts: int = 0
    last_key: str = ""


ABSENT = Tally(0)


def tally_body(mailbox: str, email: str) -> dict[str, Any]:
    """One address's messages (exact: ``track_total_hits``) and its newest message (key and
    time from doc values), under the mailbox filter. The address is a ``term`` value only."""
    roles = [{"term": {f: email}} for f in ADDRESS_FIELDS]
    return {
        "size": 1,
        "track_total_hits": True,
        "_source": False,
        "sort": [{"ts": {"order": "desc"}}, {"message_key": {"order": "desc"}}],
        "docvalue_fields": ["message_key", {"field": "ts", "format": "epoch_second"}],
        "query": {"bool": {"filter": [
            {"term": {MAILBOX_FIELD: mailbox}},
            {"bool": {"should": roles, "minimum_should_match": 1}},
        ]}},
    }


def read_tally(answer: Mapping[str, Any]) -> Tally:
    """The :class:`Tally` of one :func:`tally_body` answer."""
    hits = answer.get("hits") or {}
    total = int((hits.get("total") or {}).get("value", 0))
    top = hits.get("hits") or []
    if not total or not top:
        return ABSENT
    fields = top[0].get("fields") or {}
    ts = int(float((fields.get("ts") or ["0"])[0]))
    return Tally(total, ts, str((fields.get("message_key") or [""])[0]))


def name_in(people: Sequence[Participant], email: str) -> str | None:
    """The address's display name among a message's From, To and Cc (never its Bcc)."""
    return next((p.name for p in people
                 if p.role in ROLES and fold(p.email) == email and p.name), None)


def contact_doc(mailbox: str, email: str, tally: Tally, name: str | None) -> dict[str, Any]:
    return {
        MAILBOX_FIELD: mailbox,
        "email": email,
        "domains": domains(email),
        "name": name,
        "messages": tally.messages,
        "last_ts": tally.last_ts,
        "last_key": tally.last_key,
    }


def touched(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> set[str]:
    """The addresses whose figures a change of one message's document can move: none when
    the document stays, with the same addresses and time; else those of both versions."""
    if before is not None and after is not None and (
            addresses_of(before) == addresses_of(after)
            and int(before.get("ts") or 0) == int(after.get("ts") or 0)):
        return set()
    return addresses_of(before) | addresses_of(after)


def chunks(values: Iterable[str], size: int) -> Iterable[list[str]]:
    batch: list[str] = []
    for v in values:
        batch.append(v)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
