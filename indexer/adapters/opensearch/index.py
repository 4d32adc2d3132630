"""OpenSearch adapter: the versioned index template, the alias readers use, and bulk writes.

Documents are routed by mailbox and addressed by :func:`point_id`; writes go through
``helpers.streaming_bulk`` with per-item outcomes: 429 is resent by the helper with backoff,
other 429/5xx left over become :class:`TransientError` (retry the task), a 4xx rejection is
poison for that message only, and a 404 on delete is success. A 401/403 — of the bulk call or
of any item — is the sidecar refused, not the message: :meth:`OpenSearchIndex.apply` raises a
:class:`~indexer.core.errors.ConfigurationError` for the whole batch (it waits, never a dead
letter).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from importlib.resources import files
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import (
    ConnectionError as OSConnectionError,
)
from opensearchpy.exceptions import (
    ConnectionTimeout,
    NotFoundError,
    TransportError,
)

from indexer.adapters.opensearch import cluster
from indexer.adapters.opensearch import serverless as aoss
from indexer.adapters.opensearch.auth import client_options
from indexer.adapters.opensearch.cluster import Distribution, SidecarOpenSearch, distribution
from indexer.adapters.opensearch.errors import (
    REFUSED_STATUSES,
    client_error,
    refusal,
    refused_message,
)
from indexer.core.documents import point_id
from indexer.core.errors import ConfigurationError, ErrorKind, PoisonError, TransientError
from indexer.core.plan import MessageRef
from indexer.metrics import BULK_ERRORS, bulk_error_class
from indexer.settings import Settings

MAPPINGS = files("indexer") / "mappings"  # package data, read with importlib.resources
WRITE_ALIAS_SUFFIX = "-write"
MAPPING_VERSION = 6  # mappings/messages-v6.json (v5 + phrase-prefix fields); older kept for reindex


@lru_cache(maxsize=8)
def mapping_file(version: int = MAPPING_VERSION) -> dict[str, Any]:
    """The versioned template body from ``mappings/`` (without its comment)."""
    raw = json.loads((MAPPINGS / f"messages-v{version}.json").read_text(encoding="utf-8"))
    raw.pop("_comment", None)
    return dict(raw)


def build_client(settings: Settings) -> OpenSearch:
    """One client per process, from settings (auth and TLS: :mod:`.opensearch_auth`).

    ``pool_maxsize``: urllib3 keeps one connection per host unless told otherwise, so
    concurrent requests beyond it opened (and, on a domain, TLS- and SigV4-handshook) a
    connection each and dropped it after ("connection pool is full"). A timeout is never
    retried by the client: a search that timed out would cost the engine the same again, and
    a bulk write that timed out is retried by its task, with backoff.

    Several hosts (``SIDECAR_OPENSEARCH_URL`` as a comma list): requests go round-robin; a
    node that refuses or drops a connection is marked dead for a while and the request is
    sent to the next one (``max_retries``), so a lost node costs a retry, not an error.
    """
    return SidecarOpenSearch(
        Distribution(settings.opensearch_shards, settings.opensearch_replicas,
                     settings.opensearch_wait_for_active_shards,
                     settings.opensearch_refresh_interval),
        hosts=settings.opensearch_hosts,
        timeout=30,
        max_retries=2,
        retry_on_timeout=False,
        pool_maxsize=settings.opensearch_pool_size,
        http_compress=False,
        **client_options(settings),
    )


def classify(exc: BaseException) -> ErrorKind | None:
    """The kind of an opensearch-py exception (``None``: not opensearch-py's).

    Connection trouble, timeouts, 429 and genuine 5xx are transient; 401/403 is the sidecar
    refused (credentials, access policy, role mapping): a configuration error, retried until
    fixed; a request the engine refuses — another 4xx, or a 5xx whose causes say so
    (``too_many_nested_clauses`` comes as HTTP 500;
    :func:`~indexer.adapters.opensearch.errors.client_error`) — is poison: never retried, a
    400 for an API caller.
    """
    if isinstance(exc, OSConnectionError | ConnectionTimeout):
        return ErrorKind.TRANSIENT
    if isinstance(exc, TransportError):
        if exc.status_code in REFUSED_STATUSES:
            return ErrorKind.CONFIG
        if client_error(exc) is not None:
            return ErrorKind.POISON
        status = exc.status_code if isinstance(exc.status_code, int) else 0
        if status == 429 or status >= 500:
            return ErrorKind.TRANSIENT
        return ErrorKind.POISON if 400 <= status < 500 else ErrorKind.UNEXPECTED
    return None


def is_transient(exc: BaseException) -> bool:
    """Worth retrying later: an outage, or a 401/403 an operator will fix (for an API caller
    both are the engine unavailable, a 503 — never the query's fault)."""
    return classify(exc) in (ErrorKind.TRANSIENT, ErrorKind.CONFIG)


def _core_error(exc: BaseException, what: str) -> Exception | None:
    """The core's error for an opensearch-py exception: :class:`ConfigurationError` for a
    401/403 (saying what to check), :class:`TransientError` for an outage; ``None``: let it
    through as it is."""
    refused = refusal(exc)
    if refused is not None:
        return refused
    return TransientError(f"{what}: {exc}") if classify(exc) is ErrorKind.TRANSIENT else None


class SearchBudgetExceeded(PoisonError):
    """A search took longer than its time budget: the engine stopped it (partial results are
    not served) — the request is too costly, not the engine down."""

    def __init__(self, budget_ms: int) -> None:
        super().__init__(
            f"the search took longer than its budget of {budget_ms} ms "
            "(SIDECAR_SEARCH_TIMEOUT_MS): narrow the query (fewer prefixes or words, a date "
            "range, a sender)"
        )
        self.budget_ms = budget_ms


def _cancelled(exc: BaseException) -> bool:
    """OpenSearch cancelled the search task after ``cancel_after_time_interval``."""
    return isinstance(exc, TransportError) and "task_cancelled" in str(exc.info)


class OpenSearchIndex:
    """The message index family behind one alias.

    ``serverless``: the client talks to an OpenSearch Serverless collection (read from its
    signer): the template, ``refresh``, purge, scans and the ping take the paths of
    :mod:`.opensearch_serverless` instead of the calls collections lack.
    """

    def __init__(self, client: OpenSearch, alias: str) -> None:
        self.client = client
        self.alias = alias
        self.serverless = aoss.is_serverless(client)

    def index_name(self, version: int = MAPPING_VERSION) -> str:
        return f"{self.alias}-v{version}"

    @property
    def write_alias(self) -> str:
        """Extra write targets: the index being built by a reindex, or the one kept for rollback.

        Searches read ``alias`` only; every write goes to the members of both aliases.
        """
        return f"{self.alias}{WRITE_ALIAS_SUFFIX}"

    def put_template(self, version: int = MAPPING_VERSION) -> None:
        """The template of one mapping version, matching only that version's index name.

        One template per version (priority = version) so that a worker still running older code
        and a reindex to a newer version never fight over one shared template.
        """
        body = mapping_file(version)
        template = {
            "index_patterns": [self.index_name(version)],
            "priority": 100 + version,
            "version": body["version"],
            "template": aoss.strip_settings(body["template"]) if self.serverless
            else self._distributed(body["template"]),
            "_meta": {"mapping_version": version, "owner": "mail-search-sidecar"},
        }
        self._call(
            self.client.indices.put_index_template,
            name=f"{self.alias}-messages-v{version}",
            body=template,
        )

    def _distributed(self, template: Mapping[str, Any]) -> dict[str, Any]:
        return cluster.with_distribution(template, distribution(self.client))

    def _align_settings(self, indices: Sequence[str]) -> None:
        if not self.serverless:
            cluster.align_settings(self._call, self.client, indices)

    def create_index(self, version: int) -> str:
        """Create ``<alias>-v<version>`` from its template, in no alias (idempotent)."""
        self.put_template(version)
        name = self.index_name(version)
        if not self._call(self.client.indices.exists, index=name):
            try:
                self.client.indices.create(index=name)
            except TransportError as exc:
                refused = refusal(exc)
                if refused is not None:
                    raise refused from exc
                if "resource_already_exists" not in str(exc.error):
                    raise
        return name

    def ensure(self, version: int = MAPPING_VERSION) -> str:
        """Apply the template; on a fresh cluster create the index and point the alias at it.

        When the alias already exists nothing else is created: a reindex moves it, not start-up
        (a process running newer code must not leave an empty unaliased index behind).
        """
        self.put_template(version)
        current = self.aliases()[self.alias]
        if current:
            self._align_settings(current)
            return current[0]
        name = self.create_index(version)
        self._call(
            self.client.indices.update_aliases,
            body={
                "actions": [{"add": {"index": name, "alias": self.alias, "is_write_index": True}}]
            },
        )
        return name

    def _call(self, method: Any, **kwargs: Any) -> Any:
        try:
            return method(**kwargs)
        except Exception as exc:
            core = _core_error(exc, "opensearch")
            if core is not None:
                raise core from exc
            raise

    def aliases(self) -> dict[str, list[str]]:
        """Members of the read alias and of the write alias (one cluster-state read)."""
        try:
            found = self.client.indices.get_alias(name=f"{self.alias}*")
        except NotFoundError:
            found = {}
        except Exception as exc:
            core = _core_error(exc, "opensearch")
            if core is not None:
                raise core from exc
            raise
        return {
            name: sorted(i for i, v in found.items() if name in v.get("aliases", {}))
            for name in (self.alias, self.write_alias)
        }

    def has_analyzer(self, name: str) -> bool:
        """Whether every index behind the read alias defines the analyzer ``name`` (what a newer
        mapping version adds, used only where the index has it). No index, or a cluster that
        does not serve ``_settings`` (a serverless collection may not): False."""
        try:
            found = self._call(self.client.indices.get_settings, index=self.alias,
                               name=f"index.analysis.analyzer.{name}.type")
        except TransportError as exc:  # a refusal, 404 (no index yet) included
            if client_error(exc):
                return False
            raise
        return bool(found) and all(member.get("settings") for member in found.values())

    def write_targets(self) -> list[str]:
        """Indices every write goes to: the read alias's and the write alias's members.

        Read afresh for every batch (no cache), so a target added by ``sidecar reindex`` is used
        by every write that starts after the alias change was acknowledged.
        """
        return sorted({i for members in self.aliases().values() for i in members})

    def refresh(self, *indices: str) -> None:
        """Make every acknowledged write visible to searches (reconcile, purge, tests), in the
        read alias or in the named indices: a ``_refresh`` on a domain; on a collection, which
        has none, wait until a marker written now is searchable (the same guarantee)."""
        if not self.serverless:
            self._call(self.client.indices.refresh, index=",".join(indices) or self.alias)
            return
        targets = list(indices) or self.aliases()[self.alias]
        aoss.wait_searchable(self._call, self.client, targets, aoss.visible_timeout(self.client))

    def update_aliases(self, actions: list[dict[str, Any]], *, missing_ok: bool = False) -> None:
        """One atomic ``_aliases`` request (every action applies, or none)."""
        extra: dict[str, Any] = {"ignore": [404]} if missing_ok else {}
        self._call(self.client.indices.update_aliases, body={"actions": actions}, **extra)

    def index_exists(self, name: str) -> bool:
        return bool(self._call(self.client.indices.exists, index=name))

    def delete_index(self, name: str) -> None:
        """Delete an index of the family; an absent one is no error."""
        self._call(self.client.indices.delete, index=name, ignore=[404])

    def search(
        self, mailbox_id: str, body: dict[str, Any], *, budget_ms: int | None = None
    ) -> list[dict[str, Any]]:
        """The hits of :meth:`search_response`."""
        return list(self.search_response(mailbox_id, body, budget_ms=budget_ms)["hits"]["hits"])

    def search_response(
        self, mailbox_id: str, body: dict[str, Any], *, budget_ms: int | None = None
    ) -> dict[str, Any]:
        """The answer to one mailbox-routed search of the read alias (no hits when no index
        exists yet). A request the engine refuses raises :class:`PoisonError` with the reason (the
        API's 400); an engine failure :class:`TransientError` (its 503).

        ``budget_ms``: the engine stops collecting after it (``timeout``) and cancels the
        search task soon after (``cancel_after_time_interval``); the client waits a little
        longer, once. A search that used up its budget is :class:`SearchBudgetExceeded`: the
        query is too costly for this mailbox, and retrying it would cost the same again.
        """
        params: dict[str, Any] = {}
        if budget_ms is not None:
            body = {**body, "timeout": f"{budget_ms}ms"}
            params = {
                # Cancelled at the budget itself: an over-budget search holds the engine no
                # longer than it was allowed (it was twice the budget: 4-5 s for a "2 s").
                "cancel_after_time_interval": f"{budget_ms}ms",
                "request_timeout": budget_ms * 3 / 1000 + 1,
            }
        try:
            result = self.client.search(index=self.alias, body=body, routing=mailbox_id, **params)
        except NotFoundError:
            return {"hits": {"hits": [], "total": {"value": 0}}}
        except ConnectionTimeout as exc:
            if budget_ms is not None:
                raise SearchBudgetExceeded(budget_ms) from exc
            raise TransientError(f"opensearch: {exc}") from exc
        except Exception as exc:
            refused = client_error(exc)
            if refused:
                raise PoisonError(refused) from exc
            if _cancelled(exc) and budget_ms is not None:
                raise SearchBudgetExceeded(budget_ms) from exc
            if is_transient(exc):
                raise TransientError(f"opensearch: {exc}") from exc
            raise
        if budget_ms is not None and result.get("timed_out"):
            raise SearchBudgetExceeded(budget_ms)
        return dict(result)

    def term_vectors(
        self, mailbox_id: str, doc_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """One routed document's ``_termvectors`` (``{}``: no such document, or no index yet).
        ``_termvectors`` names one index: while a reindex holds two behind the read alias, the
        newest is asked (it holds every current document)."""
        def ask(index: str) -> dict[str, Any]:
            found = self.client.termvectors(index=index, id=doc_id, routing=mailbox_id, body=body)
            return dict(found) if found.get("found") else {}

        try:
            return ask(self.alias)
        except NotFoundError:
            return {}
        except Exception as exc:
            members = self.aliases()[self.alias] if client_error(exc) else []
            if len(members) > 1:
                return self._call(ask, index=members[-1])  # type: ignore[no-any-return]
            core = _core_error(exc, "opensearch")
            if core is not None:
                raise core from exc
            raise

    def ping(self) -> None:
        """Readiness probe: the cluster answers (errors classified like every call; a 401/403
        is a :class:`ConfigurationError` saying what to check, for ``/readyz``). A collection
        does not serve ``GET /``: it is asked whether the alias exists instead."""
        if self.serverless:
            self._call(self.client.indices.exists, index=self.alias)
            return
        self._call(self.client.info)

    def scan_mailbox(self, mailbox_id: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """``_source`` (these fields) of every document of a mailbox, in any order.

        Not routed: a document written under a wrong routing is found (and reported) too.
        A collection has no scroll: its pages are ``search_after`` ones.
        """
        if self.serverless:
            try:
                for hit in aoss.search_after_hits(self._call, self.client, self.alias,
                                                  mailbox_id, list(fields)):
                    yield dict(hit["_source"])
            except NotFoundError:
                return
            return
        body = {"query": {"term": {"mailbox_id": mailbox_id}}, "_source": list(fields)}
        try:
            for hit in helpers.scan(self.client, query=body, index=self.alias, size=500):
                yield dict(hit["_source"])
        except NotFoundError:
            return
        except Exception as exc:
            core = _core_error(exc, "opensearch scan")
            if core is not None:
                raise core from exc
            raise

    def sources(self, refs: Iterable[MessageRef], fields: Sequence[str]) -> dict[MessageRef, Any]:
        """Real-time ``_source`` of these messages' documents (absent = no document)."""
        docs = [
            {"_id": point_id(r), "routing": r.mailbox_id, "_source": list(fields)} for r in refs
        ]
        if not docs:
            return {}
        by_id = {point_id(r): r for r in refs}
        found = self._call(self.client.mget, index=self.alias, body={"docs": docs})
        return {by_id[d["_id"]]: d["_source"] for d in found["docs"] if d.get("found")}

    def mailbox_ids(self) -> set[str]:
        """Every mailbox with at least one document."""
        return set(self.mailbox_counts())

    def mailbox_counts(self, index: str | None = None) -> dict[str, int]:
        """Documents per mailbox in ``index`` (default: the alias); a paged composite agg.
        The visibility marker of a collection's ``refresh`` is no mailbox: left out."""
        found: dict[str, int] = {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1000,
                "sources": [{"m": {"terms": {"field": "mailbox_id"}}}],
            }
            if after:
                composite["after"] = after
            body = {"size": 0, "aggs": {"m": {"composite": composite}},
                    "query": {"bool": {"must_not": [aoss.marker_filter()]}}}
            try:
                agg = self._call(self.client.search, index=index or self.alias, body=body)
            except NotFoundError:
                return found
            buckets = agg["aggregations"]["m"]["buckets"]
            found.update({b["key"]["m"]: int(b["doc_count"]) for b in buckets})
            after = agg["aggregations"]["m"].get("after_key")
            if not buckets or after is None:
                return found

    def delete_mailbox(self, mailbox_id: str) -> int:
        """Delete every document of a mailbox from every index of the family; the count.
        A collection has no ``_delete_by_query``: search and bulk-delete until none is left."""
        if self.serverless:
            return aoss.delete_by_search(self._call, self.client, f"{self.alias}-v*",
                                         mailbox_id, aoss.visible_timeout(self.client))
        result = self._call(
            self.client.delete_by_query,
            index=f"{self.alias}-v*",
            body={"query": {"term": {"mailbox_id": mailbox_id}}},
            conflicts="proceed",
            refresh=True,
        )
        if result.get("failures"):
            raise TransientError(f"opensearch delete_by_query: {result['failures'][0]}")
        return int(result.get("deleted", 0))

    def _actions(
        self, docs: Mapping[MessageRef, Mapping[str, Any] | None], index: str
    ) -> Iterator[dict[str, Any]]:
        for ref, doc in docs.items():
            base = {"_index": index, "_id": point_id(ref), "routing": ref.mailbox_id}
            if doc is None:
                yield {"_op_type": "delete", **base}
            else:
                yield {"_op_type": "index", "_source": dict(doc), **base}

    def _bulk_params(self) -> dict[str, Any]:
        """``wait_for_active_shards`` when it is not OpenSearch's default of 1 (collections
        take no such parameter)."""
        wait = distribution(self.client).wait_for_active_shards
        return {} if self.serverless or wait == "1" else {"wait_for_active_shards": wait}

    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        """Index or delete each message's document; returns poison rejections by message.

        Raises :class:`TransientError` if any item failed for a reason worth retrying, and
        :class:`ConfigurationError` if OpenSearch refused the sidecar (401/403) anywhere in
        the batch — targets, template, bulk call or item: no message of it is poison then.
        """
        by_id = {point_id(ref): ref for ref in docs}
        poison: dict[MessageRef, str] = {}
        transient: list[str] = []
        refused: list[tuple[int, str]] = []
        for index in self.write_targets() or [self.ensure()]:
            try:
                results = helpers.streaming_bulk(
                    self.client,
                    self._actions(docs, index),
                    chunk_size=500,
                    max_chunk_bytes=20 * 1024 * 1024,
                    raise_on_error=False,
                    raise_on_exception=False,
                    max_retries=3,
                    initial_backoff=1,
                    yield_ok=True,
                    **self._bulk_params(),
                )
                for ok, item in results:
                    self._outcome(ok, item, by_id, poison, transient, refused)
            except Exception as exc:
                core = _core_error(exc, "opensearch bulk")
                if isinstance(core, ConfigurationError):
                    raise core from exc
                if core is not None:
                    BULK_ERRORS.labels("connection").inc()
                    raise core from exc
                raise
        if refused:  # the whole batch waits: these items are not poison either
            raise ConfigurationError("opensearch", refused_message(*refused[0]))
        if transient:
            raise TransientError(f"opensearch: {len(transient)} item(s) failed: {transient[0]}")
        return poison

    @staticmethod
    def _outcome(
        ok: bool,
        item: Mapping[str, Any],
        by_id: Mapping[str, MessageRef],
        poison: dict[MessageRef, str],
        transient: list[str],
        refused: list[tuple[int, str]],
    ) -> None:
        ((op, result),) = item.items()
        status = int(result.get("status", 0))
        if ok or (op == "delete" and status == 404):
            return
        reason = json.dumps(result.get("error", result.get("exception", "")))[:500]
        BULK_ERRORS.labels(bulk_error_class(status)).inc()
        if status in REFUSED_STATUSES:
            refused.append((status, reason))
        elif status == 429 or status >= 500 or status == 0:
            transient.append(f"{status} {reason}")
        elif result.get("_id") in by_id:
            poison[by_id[result["_id"]]] = f"opensearch rejected ({status}): {reason}"
        else:
            transient.append(f"{status} {reason}")
