"""What the sidecar does differently on an OpenSearch Serverless (``aoss``) collection.

Collections offer a subset of the OpenSearch API (AWS, "Supported operations and plugins in
Amazon OpenSearch Serverless"); of what the sidecar calls on a Service domain they lack:

- index settings the service manages (``number_of_shards``, ``number_of_replicas``,
  ``refresh_interval``): :func:`strip_settings` leaves them out of the template, keeping the
  analysis and similarity settings;
- ``POST <index>/_refresh``: :func:`wait_searchable` writes a marker document and polls a
  search until it is found (collections make writes searchable on their own schedule), so
  ``refresh()`` means "every acknowledged write is searchable" on both services;
- ``_delete_by_query``: :func:`delete_by_search` pages a mailbox's ids with ``search_after``
  on ``message_key`` and bulk-deletes them, until a search finds none;
- scroll (``helpers.scan``): :func:`search_after_hits` pages instead;
- ``GET /`` (the cluster info of a ping): the readiness probe asks ``HEAD <alias>``.

The mode is read from the client itself (its signer's service), so every
:class:`~indexer.adapters.opensearch.index.OpenSearchIndex` built from settings follows it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from opensearchpy import OpenSearch

from indexer.core.errors import TransientError
from indexer.core.pace import Pace, batch_size

# Settings a collection refuses in a template or index body (the service manages them).
REFUSED_SETTINGS = frozenset({"number_of_shards", "number_of_replicas", "refresh_interval"})
# The marker's mailbox id: no tenant's can contain '#' (indexer.core.items keys split on it and
# the API and purge refuse it), so no caller's search, count or purge ever meets the marker.
MARKER_MAILBOX = "#sidecar-visibility"
DEFAULT_VISIBLE_TIMEOUT_S = 30.0
PAGE = 500
MAX_DELETE_ROUNDS = 20

Call = Callable[..., Any]


def is_serverless(client: OpenSearch) -> bool:
    """The client signs for ``aoss``: it talks to a Serverless collection."""
    signer = client.transport.kwargs.get("http_auth")
    return getattr(signer, "service", None) == "aoss"


def visible_timeout(client: OpenSearch) -> float:
    """How long :func:`wait_searchable` waits (``SIDECAR_OPENSEARCH_VISIBLE_TIMEOUT_S``, carried
    by the signer so that callers building the index from a client need no settings)."""
    signer = client.transport.kwargs.get("http_auth")
    return float(getattr(signer, "visible_timeout_s", DEFAULT_VISIBLE_TIMEOUT_S))


def strip_settings(template: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a template's ``template`` body without the settings collections refuse, in
    any of the spellings OpenSearch accepts (``number_of_shards``, ``index.number_of_shards``,
    ``{"index": {"number_of_shards": ...}}``)."""
    body = dict(template)
    settings = dict(body.get("settings", {}))
    for name in list(settings):
        if name.removeprefix("index.") in REFUSED_SETTINGS:
            del settings[name]
    nested = settings.get("index")
    if isinstance(nested, Mapping):
        kept = {k: v for k, v in nested.items() if k not in REFUSED_SETTINGS}
        if kept:
            settings["index"] = kept
        else:
            del settings["index"]
    body["settings"] = settings
    return body


def marker_filter() -> dict[str, Any]:
    """A ``must_not`` clause keeping the marker out of per-mailbox counts (a deleted marker
    stays visible until the collection's next refresh)."""
    return {"term": {"mailbox_id": MARKER_MAILBOX}}


def wait_searchable(call: Call, client: OpenSearch, indices: list[str], timeout_s: float) -> None:
    """Return once every write acknowledged before the call is searchable in ``indices``.

    Writes one marker document per index, polls a search for each until it is found (at most
    ``timeout_s``: then :class:`TransientError`), then deletes them. Assumes, as for a domain's
    refresh, that a collection makes an index's writes searchable in acknowledgement order.
    """
    if not indices:
        return
    token = uuid.uuid4().hex
    doc_id = f"visibility-{token}"
    source = {"mailbox_id": MARKER_MAILBOX, "message_key": token}
    meta = [{"_index": i, "_id": doc_id, "routing": MARKER_MAILBOX} for i in indices]
    _bulk(call, client, [line for m in meta for line in ({"index": m}, source)])
    query = {"size": 0, "track_total_hits": True, "query": {"term": {"message_key": token}}}
    waiting, deadline, pause = set(indices), time.monotonic() + timeout_s, 0.1
    try:
        while waiting:
            for index in sorted(waiting):
                found = call(client.search, index=index, body=query, routing=MARKER_MAILBOX)
                if found["hits"]["total"]["value"]:
                    waiting.discard(index)
            if waiting and time.monotonic() > deadline:
                raise TransientError(
                    f"opensearch: writes to {', '.join(sorted(waiting))} not searchable after "
                    f"{timeout_s:.0f} s (SIDECAR_OPENSEARCH_VISIBLE_TIMEOUT_S)")
            if waiting:
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
    finally:
        _bulk(call, client, [{"delete": m} for m in meta])


def search_after_hits(
    call: Call, client: OpenSearch, index: str, mailbox_id: str, source: list[str] | bool
) -> Iterator[dict[str, Any]]:
    """Every hit of a mailbox in ``index``, paged with ``search_after`` on ``message_key``
    (collections have no scroll; a message key is unique within a mailbox and an index)."""
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {
            "size": PAGE, "_source": source, "sort": [{"message_key": "asc"}],
            "query": {"term": {"mailbox_id": mailbox_id}},
        }
        if after is not None:
            body["search_after"] = after
        hits = call(client.search, index=index, body=body)["hits"]["hits"]
        yield from hits
        if len(hits) < PAGE:
            return
        after = hits[-1]["sort"]


def delete_by_search(
    call: Call, client: OpenSearch, pattern: str, mailbox_id: str, timeout_s: float,
    rate: float = 0,
) -> int:
    """Delete every document of a mailbox in the indices matching ``pattern``; the count.

    Each round pages the ids (:func:`search_after_hits`) and bulk-deletes them, then waits
    until the deletes are searchable and looks again: a document written meanwhile, or one
    a page boundary skipped, is found by the next round. Deleted = items answered ``deleted``
    (a 404 is a document already gone, not counted). ``rate`` paces the deletes (documents
    per second, 0 = unpaced) in bulks of a tenth of it.
    """
    indices = sorted(call(client.indices.get, index=pattern))  # a wildcard: {} when none
    deleted, size, pace = 0, batch_size(rate, PAGE), Pace(rate)
    pace.start()
    for _ in range(MAX_DELETE_ROUNDS):
        found = 0
        for index in indices:
            batch: list[dict[str, Any]] = []
            for hit in search_after_hits(call, client, index, mailbox_id, False):
                routing = hit.get("_routing", mailbox_id)
                batch.append({"delete": {"_index": index, "_id": hit["_id"], "routing": routing}})
                if len(batch) == size:
                    deleted += _bulk(call, client, batch)
                    found, batch = found + size, []
                    pace.done(size)
            if batch:
                deleted += _bulk(call, client, batch)
                found += len(batch)
                pace.done(len(batch))
        if not found:
            return deleted
        wait_searchable(call, client, indices, timeout_s)
    raise TransientError(f"opensearch: {mailbox_id} still has documents after "
                         f"{MAX_DELETE_ROUNDS} delete rounds (writes still arriving?)")


def _bulk(call: Call, client: OpenSearch, lines: list[dict[str, Any]]) -> int:
    """One ``_bulk`` request; the items deleted. An item failing other than a delete's 404 is
    a :class:`TransientError` (the caller's operation is retried whole)."""
    if not lines:
        return 0
    answer = call(client.bulk, body=lines)
    deleted = 0
    for item in answer.get("items", []):
        ((op, result),) = item.items()
        status = int(result.get("status", 0))
        if op == "delete" and result.get("result") == "deleted":
            deleted += 1
        elif status >= 300 and not (op == "delete" and status == 404):
            raise TransientError(f"opensearch bulk {op}: {status} {result.get('error')}")
    return deleted
