"""The workers' face of the index family: bulk index and delete with per-item outcomes.

Documents are routed by mailbox and addressed by :func:`point_id`; writes go through
``helpers.streaming_bulk`` to every write target: 429 is resent by the helper with backoff,
other 429/5xx left over become :class:`TransientError` (retry the task), a 4xx rejection is
poison for that message only, and a 404 on delete is success. A 401/403 — of the bulk call or
of any item — is the sidecar refused, not the message: :meth:`IndexWrites.apply` raises a
:class:`~indexer.core.errors.ConfigurationError` for the whole batch (it waits, never a dead
letter).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from opensearchpy import helpers

from indexer.adapters.opensearch.admin import IndexAdmin
from indexer.adapters.opensearch.errors import REFUSED_STATUSES, core_error, refused_message
from indexer.adapters.opensearch.family import MAPPING_VERSION, version_of
from indexer.core.documents import point_id
from indexer.core.errors import ConfigurationError, TransientError
from indexer.core.language import for_version
from indexer.core.plan import MessageRef
from indexer.metrics import BULK_ERRORS, bulk_error_class


class IndexWrites(IndexAdmin):
    """Writes reach every member of both aliases; the first batch on a fresh cluster makes
    the index (hence the admin face beneath)."""

    def write_targets(self) -> list[str]:
        """Indices every write goes to: the read alias's and the write alias's members.

        Read afresh for every batch (no cache), so a target added by ``sidecar reindex`` is used
        by every write that starts after the alias change was acknowledged.
        """
        return sorted({i for members in self.aliases().values() for i in members})

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
                    _actions(docs, index, version_of(self.alias, index) or MAPPING_VERSION),
                    chunk_size=500,
                    max_chunk_bytes=20 * 1024 * 1024,
                    raise_on_error=False,
                    raise_on_exception=False,
                    max_retries=3,
                    initial_backoff=1,
                    yield_ok=True,
                    **self.flavour.bulk_params(self.client),
                )
                for ok, item in results:
                    item_outcome(ok, item, by_id, poison, transient, refused)
            except Exception as exc:
                core = core_error(exc, "opensearch bulk")
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


def _actions(
    docs: Mapping[MessageRef, Mapping[str, Any] | None], index: str, version: int
) -> Iterator[dict[str, Any]]:
    """Bulk actions for one target, each document as that target's mapping version takes
    it (an index not named ``<alias>-v<N>`` is taken as of this version)."""
    for ref, doc in docs.items():
        base = {"_index": index, "_id": point_id(ref), "routing": ref.mailbox_id}
        if doc is None:
            yield {"_op_type": "delete", **base}
        else:
            yield {"_op_type": "index", "_source": for_version(dict(doc), version), **base}


def item_outcome(
    ok: bool,
    item: Mapping[str, Any],
    by_id: Mapping[str, MessageRef],
    poison: dict[MessageRef, str],
    transient: list[str],
    refused: list[tuple[int, str]],
) -> None:
    """Sort one bulk item: fine, refused (the sidecar), transient, or poison (the message)."""
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
