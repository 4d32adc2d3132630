"""The API's face of the index family: mailbox-routed searches with a time budget, one
document's term vectors, real-time sources, and the readiness ping."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opensearchpy.exceptions import ConnectionTimeout, NotFoundError

from indexer.adapters.opensearch.errors import (
    SearchBudgetExceeded,
    cancelled,
    client_error,
    core_error,
    is_transient,
)
from indexer.adapters.opensearch.family import IndexFamily
from indexer.core.documents import point_id
from indexer.core.errors import PoisonError, TransientError
from indexer.core.plan import MessageRef


class IndexReads(IndexFamily):
    """Reads of the read alias only, each routed to the mailbox's shard."""

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
            if cancelled(exc) and budget_ms is not None:
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
            core = core_error(exc, "opensearch")
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

    def ping(self) -> None:
        """Readiness probe: the cluster answers (errors classified like every call; a 401/403
        is a :class:`ConfigurationError` saying what to check, for ``/readyz``). A collection
        does not serve ``GET /``: it is asked whether the alias exists instead."""
        self.flavour.ping(self._call, self.client, self.alias)
