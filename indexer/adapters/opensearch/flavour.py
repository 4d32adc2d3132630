"""Which OpenSearch the client talks to — a managed domain (or a local node) or a Serverless
collection — as one object, so the index's faces ask it instead of branching on a flag.

A collection lacks some of the calls a domain serves (the list, and the paths taken instead:
:mod:`.serverless`); everything else is the same API. The flavour is read from the client
itself (its signer's service), so every index built from settings follows it.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import NotFoundError, TransportError

from indexer.adapters.opensearch import cluster
from indexer.adapters.opensearch import serverless as aoss
from indexer.adapters.opensearch.cluster import distribution
from indexer.core.errors import TransientError
from indexer.core.pace import batch_size

# delete-by-query's scroll batch when unpaced (OpenSearch's own default)
DELETE_SCROLL = 1000

Call = Callable[..., Any]
log = logging.getLogger(__name__)


class Flavour(Protocol):
    """What differs between a domain and a collection, and nothing else."""

    @property
    def name(self) -> str:
        """``managed`` or ``serverless``."""

    def template(self, client: OpenSearch, body: Mapping[str, Any]) -> dict[str, Any]:
        """The ``template`` part of an index template for this flavour."""

    def align(self, call: Call, client: OpenSearch, indices: Sequence[str]) -> None:
        """Bring live indices to the configured distribution and refresh interval."""

    def refresh(self, call: Call, client: OpenSearch, targets: Sequence[str]) -> None:
        """Every acknowledged write to ``targets`` searchable when this returns."""

    def ping(self, call: Call, client: OpenSearch, alias: str) -> None:
        """A cheap call that answers only when the engine serves the sidecar."""

    def scan(self, call: Call, client: OpenSearch, alias: str, mailbox_id: str,
             fields: list[str]) -> Iterator[Mapping[str, Any]]:
        """Every hit of a mailbox (not routed), in any order."""

    def delete_mailbox(self, call: Call, client: OpenSearch, pattern: str,
                       mailbox_id: str, rate: float) -> int:
        """Delete a mailbox's documents from every index matching ``pattern``, ``rate``
        documents per second (0 = unpaced); the count."""

    def bulk_params(self, client: OpenSearch) -> dict[str, Any]:
        """Extra parameters of a ``_bulk`` call."""


@dataclass(frozen=True)
class Managed:
    """An OpenSearch Service domain or any self-run cluster: the whole API."""

    name: str = "managed"

    def template(self, client: OpenSearch, body: Mapping[str, Any]) -> dict[str, Any]:
        return cluster.with_distribution(body, distribution(client))

    def align(self, call: Call, client: OpenSearch, indices: Sequence[str]) -> None:
        cluster.align_settings(call, client, indices)

    def refresh(self, call: Call, client: OpenSearch, targets: Sequence[str]) -> None:
        call(client.indices.refresh, index=",".join(targets))

    def ping(self, call: Call, client: OpenSearch, alias: str) -> None:
        call(client.info)

    def scan(self, call: Call, client: OpenSearch, alias: str, mailbox_id: str,
             fields: list[str]) -> Iterator[Mapping[str, Any]]:
        body = {"query": {"term": {"mailbox_id": mailbox_id}}, "_source": fields}
        yield from helpers.scan(client, query=body, index=alias, size=500)

    def delete_mailbox(self, call: Call, client: OpenSearch, pattern: str,
                       mailbox_id: str, rate: float) -> int:
        """A delete-by-query run as a task, throttled by the engine itself
        (``requests_per_second``, small scroll batches): a paced purge of a whale outlasts any
        one HTTP request's timeout, so the task is polled until it completes."""
        started = call(client.delete_by_query, index=pattern,
                       body={"query": {"term": {"mailbox_id": mailbox_id}}},
                       conflicts="proceed", refresh=True, wait_for_completion=False,
                       requests_per_second=rate if rate > 0 else -1,
                       scroll_size=batch_size(rate, DELETE_SCROLL))
        task_id = str(started["task"])
        result = _completed(call, client, task_id)
        _forget(client, task_id)
        if result.get("failures"):
            raise TransientError(f"opensearch delete_by_query: {result['failures'][0]}")
        return int(result.get("deleted", 0))

    def bulk_params(self, client: OpenSearch) -> dict[str, Any]:
        """``wait_for_active_shards`` when it is not OpenSearch's default of 1."""
        wait = distribution(client).wait_for_active_shards
        return {} if wait == "1" else {"wait_for_active_shards": wait}


@dataclass(frozen=True)
class Serverless:
    """An OpenSearch Serverless collection: the service manages shards, replicas and refresh,
    and there is no ``_refresh``, ``_delete_by_query``, scroll or ``GET /``."""

    name: str = "serverless"

    def template(self, client: OpenSearch, body: Mapping[str, Any]) -> dict[str, Any]:
        return aoss.strip_settings(body)

    def align(self, call: Call, client: OpenSearch, indices: Sequence[str]) -> None:
        return None  # the service owns the settings align_settings would set

    def refresh(self, call: Call, client: OpenSearch, targets: Sequence[str]) -> None:
        aoss.wait_searchable(call, client, list(targets), aoss.visible_timeout(client))

    def ping(self, call: Call, client: OpenSearch, alias: str) -> None:
        call(client.indices.exists, index=alias)

    def scan(self, call: Call, client: OpenSearch, alias: str, mailbox_id: str,
             fields: list[str]) -> Iterator[Mapping[str, Any]]:
        try:
            yield from aoss.search_after_hits(call, client, alias, mailbox_id, fields)
        except NotFoundError:
            return

    def delete_mailbox(self, call: Call, client: OpenSearch, pattern: str,
                       mailbox_id: str, rate: float) -> int:
        return aoss.delete_by_search(call, client, pattern, mailbox_id,
                                     aoss.visible_timeout(client), rate)

    def bulk_params(self, client: OpenSearch) -> dict[str, Any]:
        return {}  # collections take no wait_for_active_shards


def _completed(call: Call, client: OpenSearch, task_id: str) -> Mapping[str, Any]:
    """The response of a finished task, polled at a growing interval (a small purge is done
    in milliseconds, a paced whale's in minutes)."""
    wait = 0.05
    while True:
        status = call(client.tasks.get, task_id=task_id)
        if status.get("completed"):
            if status.get("error"):
                raise TransientError(f"opensearch task {task_id}: {status['error']}")
            return dict(status.get("response") or {})
        time.sleep(wait)
        wait = min(1.0, wait * 2)


def _forget(client: OpenSearch, task_id: str) -> None:
    """Delete the record OpenSearch keeps of a task run without waiting (``.tasks``, one per
    purge, kept until someone deletes it: OpenSearch's guide asks the caller to). Best effort:
    a role without the right, or a domain that refuses direct access to system indices, leaves
    it (a line at INFO naming it); the purge itself is done."""
    try:
        with warnings.catch_warnings():  # "this request accesses system indices": expected
            warnings.simplefilter("ignore")
            client.delete(index=".tasks", id=task_id)
    except NotFoundError:
        return
    except TransportError as exc:
        log.info("the purge's task record .tasks/%s was left (%s)", task_id, exc.status_code)


def flavour_of(client: OpenSearch) -> Flavour:
    """The flavour of the engine this client signs for."""
    return Serverless() if aoss.is_serverless(client) else Managed()
