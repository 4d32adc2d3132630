"""Similar emails: neighbours of a stored message, by vector, by terms, or both fused.

Measured on real threads (``sidecar eval-similar``, ``docs/quality.md``): the default fuses
(RRF) three rankings — the stored vector's neighbours, ``more_like_this`` on
subject and body, and ``more_like_this`` on the subject alone — with the tuning that ranked
a message's thread-mates highest; it beats ``more_like_this`` alone and the vector alone.
Every method is confined to the message's mailbox, never returns the message itself and,
with ``exclude_thread``, nothing of its thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from indexer.core.documents import point_id
from indexer.core.items import message_pk
from indexer.core.plan import MessageRef
from search_api import service
from search_api.backends import Backends
from search_api.query import VectorFilter, rrf
from search_api.query.more_like_this import MLT_FIELDS, more_like_this_body
from search_api.vector_search import own_point
from search_api.vector_search import search as vector_search

Method = Literal["vector", "mlt", "hybrid"]


@dataclass(frozen=True)
class Tuning:
    """Knobs of the fused ranking: candidates per engine, RRF ``k`` and weights."""

    depth: int = 20
    k: int = 10
    vector_weight: float = 0.5
    mlt_weight: float = 1.0
    subject_weight: float = 1.0  # a third ranking: more_like_this on the subject alone


DEFAULT_METHOD: Method = "hybrid"
DEFAULT_TUNING = Tuning()


def by_vector(
    backends: Backends, ref: MessageRef, point: Any, thread_key: str | None, *, size: int
) -> list[service.Candidate]:
    """Nearest stored vectors (the message's own vector, not re-embedded)."""
    flt = VectorFilter(
        ref.mailbox_id,
        exclude_message_keys=(ref.message_key,),
        exclude_thread_keys=(thread_key,) if thread_key else (),
    )
    return [service.from_point(p) for p in vector_search(backends, list(point.vector), flt, size)]


def by_terms(
    backends: Backends,
    ref: MessageRef,
    thread_key: str | None,
    *,
    size: int,
    fields: tuple[str, ...] = MLT_FIELDS,
) -> list[service.Candidate]:
    """OpenSearch ``more_like_this`` (BM25 over the message's distinctive terms)."""
    body = more_like_this_body(
        # The read alias (the index's name in settings, as factories builds it): known
        # without reaching the cluster, so its failure is os_search's, which names it.
        index=backends.settings.opensearch_index,
        doc_id=point_id(ref),
        mailbox_id=ref.mailbox_id,
        thread_key=thread_key,
        size=size,
        fields=fields,
    )
    return [service.from_hit(hit) for hit in service.os_search(backends, ref.mailbox_id, body)]


def stored(backends: Backends, ref: MessageRef) -> dict[str, Any] | None:
    """The message's META pointer item (it names the thread), or None: whether there is a
    message to find neighbours of, and which thread ``exclude_thread`` leaves out."""
    key = (message_pk(ref.mailbox_id, ref.message_key), "META")
    return backends.rows([key]).get(key)


def similar(
    backends: Backends,
    ref: MessageRef,
    *,
    limit: int,
    exclude_thread: str | None,
    method: Method = DEFAULT_METHOD,
    tuning: Tuning = DEFAULT_TUNING,
) -> list[service.Candidate]:
    """The best ``limit`` neighbours of a stored message; ``exclude_thread`` is the thread key
    to leave out (the message's own), or None. A message without a vector (no ``forai``)
    gets no vector neighbours; hybrid then falls back to its terms."""
    depth = max(limit, tuning.depth) if method == "hybrid" else limit
    # The legs run side by side: the term queries on other threads, the vector leg here.
    terms = (backends.concurrently(by_terms, backends, ref, exclude_thread, size=depth)
             if method != "vector" else None)
    subject = (
        backends.concurrently(by_terms, backends, ref, exclude_thread, size=depth,
                              fields=("subject",))
        if method == "hybrid" and tuning.subject_weight > 0
        else None
    )
    point = own_point(backends, ref) if method != "mlt" else None
    vectors = by_vector(backends, ref, point, exclude_thread, size=depth) if point else []
    if terms is None:
        return vectors
    if method == "mlt":
        return terms.result()[:limit]
    return fuse([vectors, terms.result(), subject.result() if subject else []], tuning)[:limit]


def fuse(rankings: list[list[service.Candidate]], tuning: Tuning) -> list[service.Candidate]:
    """RRF of the vector, body+subject and subject rankings on ``message_key``."""
    by_key = {c.message_key: c for ranking in reversed(rankings) for c in ranking}
    fused = rrf(
        [[c.message_key for c in ranking] for ranking in rankings],
        k=tuning.k,
        weights=[tuning.vector_weight, tuning.mlt_weight, tuning.subject_weight],
    )
    return [service.rescored(by_key[key], score) for key, score in fused]
