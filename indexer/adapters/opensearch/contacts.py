"""The contact summary's index, ``<alias>-contacts``, beside the message index family.

One small document per (mailbox, address) (:mod:`indexer.core.contacts`), routed to the
mailbox's shard like its messages. Not versioned with the message mapping: a reindex of the
messages leaves it as it is (the figures do not depend on the analyzers), and nothing in it is
read back by the pipeline — its truth is the message index, which :meth:`tallies` reads.

Prefixes are looked up, never expanded over the shard's terms: the address, its domains and
the name's words are each indexed with every 1–19-character prefix (``index_prefixes``), as
the message mapping v6 does for phrase prefixes (docs/concepts/tenancy.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from opensearchpy import helpers
from opensearchpy.exceptions import NotFoundError, TransportError

from indexer.adapters.opensearch import cluster
from indexer.adapters.opensearch.admin import IndexAdmin
from indexer.adapters.opensearch.errors import core_error
from indexer.adapters.opensearch.reads import IndexReads
from indexer.core.contacts import (
    ADDRESS_FIELDS,
    MAILBOX_FIELD,
    Tally,
    chunks,
    contact_id,
    read_tally,
    tally_body,
)
from indexer.core.documents import point_id
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef

T = TypeVar("T")
SUFFIX = "-contacts"
TALLIES_PER_REQUEST = 100  # searches of one ``_msearch``
_PREFIXES = {"min_chars": 1, "max_chars": 19}
MAPPING: dict[str, Any] = {
    "settings": {"analysis": {
        "analyzer": {
            "whole": {"type": "custom", "tokenizer": "keyword",
                      "filter": ["lowercase", "asciifolding"]},
            "words": {"type": "custom", "tokenizer": "standard",
                      "filter": ["lowercase", "asciifolding"]},
        },
    }},
    "mappings": {"dynamic": "strict", "properties": {
        MAILBOX_FIELD: {"type": "keyword"},
        "email": {"type": "keyword", "fields": {
            "p": {"type": "text", "analyzer": "whole", "index_prefixes": _PREFIXES}}},
        "domains": {"type": "text", "analyzer": "whole", "index_prefixes": _PREFIXES},
        "name": {"type": "text", "analyzer": "words", "index_prefixes": _PREFIXES},
        "messages": {"type": "integer"},
        "last_ts": {"type": "date", "format": "epoch_second"},
        "last_key": {"type": "keyword", "index": False},
    }},
}


def _status(failure: Any) -> int:
    """A bulk item failure's HTTP status (404: a delete of a contact already gone)."""
    result: Any = next(iter(failure.values()), {}) if isinstance(failure, dict) else {}
    return int(result.get("status", 0)) if isinstance(result, dict) else 0


class ContactsIndex:
    """Reads of the message index for the figures, writes and searches of the summary."""

    def __init__(self, messages: IndexAdmin) -> None:
        self.messages = messages
        self.client = messages.client
        self.name = f"{messages.alias}{SUFFIX}"
        # the search path (budget, cancellation, refusals as 400) of any index name
        self._reader = IndexReads(self.client, self.name)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        """One call, its failure classified as every OpenSearch call is (transient, refused
        credentials, a request the engine rejects)."""
        try:
            return call()
        except Exception as exc:
            core = core_error(exc, f"opensearch {what}")
            if core is not None:
                raise core from exc
            raise

    def ensure(self) -> None:
        """Create the index if it is missing (idempotent; shards and replicas as the
        message indices)."""
        body = cluster.with_distribution(MAPPING, cluster.distribution(self.client))
        if self._call("contacts", lambda: self.client.indices.exists(index=self.name)):
            return
        try:
            self._call("contacts", lambda: self.client.indices.create(index=self.name, body=body))
        except TransportError as exc:  # created meanwhile by another worker: fine
            if "resource_already_exists" not in str(exc.error):
                raise

    def tallies(self, mailbox: str, emails: Collection[str]) -> dict[str, Tally]:
        """Each address's figures in the message index now (``_msearch``, routed)."""
        found: dict[str, Tally] = {}
        for batch in chunks(sorted(emails), TALLIES_PER_REQUEST):
            lines: list[dict[str, Any]] = []
            for email in batch:
                lines += [{"index": self.messages.alias, "routing": mailbox},
                          tally_body(mailbox, email)]
            answer: dict[str, Any] = self._call(
                "tallies", lambda lines=lines: self.client.msearch(body=lines))  # type: ignore[misc]
            for email, one in zip(batch, answer["responses"], strict=True):
                if "error" in one and one.get("status") != 404:
                    raise TransientError(f"opensearch tallies: {str(one['error'])[:300]}")
                found[email] = read_tally(one)
        return found

    def write(self, mailbox: str, docs: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Index each contact's document, or delete it (None)."""
        actions = []
        for email, doc in docs.items():
            base = {"_index": self.name, "_id": contact_id(mailbox, email), "routing": mailbox}
            actions.append({"_op_type": "delete", **base} if doc is None
                           else {"_op_type": "index", "_source": dict(doc), **base})
        _, failed = self._call("contacts bulk", lambda: helpers.bulk(
            self.client, actions, raise_on_error=False, max_retries=3, initial_backoff=1))
        wrong = [f for f in failed if _status(f) != 404]
        if wrong:
            raise TransientError(f"opensearch contacts: {len(wrong)} failed: {wrong[0]}")

    def emails(self, mailbox: str, *, summary: bool) -> set[str]:
        """Every address the summary holds for the mailbox (``summary``), or that its
        messages are From, To or Cc of (paged composite aggregations)."""
        index = self.name if summary else self.messages.alias
        found: set[str] = set()
        for field in ("email",) if summary else ADDRESS_FIELDS:
            after: dict[str, Any] | None = None
            while True:
                composite: dict[str, Any] = {"size": 1000,
                                             "sources": [{"a": {"terms": {"field": field}}}]}
                if after:
                    composite["after"] = after
                body = {"size": 0, "query": {"term": {MAILBOX_FIELD: mailbox}},
                        "aggs": {"a": {"composite": composite}}}
                try:
                    answer: dict[str, Any] = self._call(
                        "contacts", lambda body=body: self.client.search(  # type: ignore[misc]
                            index=index, body=body, routing=mailbox))
                except NotFoundError:
                    break
                agg = answer["aggregations"]["a"]
                found.update(str(b["key"]["a"]) for b in agg["buckets"])
                after = agg.get("after_key")
                if not agg["buckets"] or after is None:
                    break
        return found

    def delete_mailbox(self, mailbox: str) -> int:
        """Delete every contact of a mailbox; the count."""
        try:
            result = self._call("contacts purge", lambda: self.client.delete_by_query(
                index=self.name, body={"query": {"term": {MAILBOX_FIELD: mailbox}}},
                conflicts="proceed", refresh=True))
        except NotFoundError:
            return 0
        if result.get("failures"):
            raise TransientError(f"opensearch contacts purge: {result['failures'][0]}")
        return int(result.get("deleted", 0))

    def search(self, mailbox: str, body: dict[str, Any], budget_ms: int) -> dict[str, Any]:
        """One routed search of the summary (no hits while the index does not exist)."""
        return self._reader.search_response(mailbox, body, budget_ms=budget_ms)

    def refresh(self) -> None:
        self._call("contacts", lambda: self.client.indices.refresh(index=self.name))

    def wait_visible(self, expected: Mapping[MessageRef, bool], timeout_s: float) -> None:
        """Wait until searches of the message index show each message's document present
        (True) or gone (False): the figures are counted by searches, which see a write only
        after the index's next refresh. Past ``timeout_s`` (an index whose periodic refresh
        is off) the read alias is refreshed instead."""
        ids = {point_id(r): present for r, present in expected.items()}
        routing = ",".join(sorted({r.mailbox_id for r in expected}))
        body = {"size": len(ids), "_source": False, "query": {"ids": {"values": list(ids)}}}
        deadline = time.monotonic() + timeout_s
        while ids:
            answer = self._call("visibility", lambda: self.client.search(
                index=self.messages.alias, body=body, routing=routing))
            seen = {h["_id"] for h in answer["hits"]["hits"]}
            if all((i in seen) == present for i, present in ids.items()):
                return
            if time.monotonic() > deadline:
                self.messages.refresh()
                return
            time.sleep(0.05)
