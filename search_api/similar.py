"""Similar emails: neighbours of a stored message, by vector, by terms, or both fused.

Measured on real threads (``sidecar eval-similar``, ``docs/quality.md``): the default fuses
(RRF) three rankings — the stored vector's neighbours, the message's distinctive terms in
subject and body, and in the subject alone (chosen within the mailbox) — with the tuning that ranked
a message's thread-mates highest; it beats ``more_like_this`` alone and the vector alone.
Every method is confined to the message's mailbox, never returns the message itself and,
with ``exclude_thread``, nothing of its thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from indexer.core.documents import point_id
from indexer.core.plan import MessageRef
from indexer.core.vectors import StoredPoint
from search_api import candidates as legs
from search_api.backends import Backends
from search_api.candidates import Candidate
from search_api.engine_errors import naming
from search_api.query import VectorFilter
from search_api.query import more_like_this as mlt
from search_api.query.more_like_this import MLT_FIELDS
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
    backends: Backends, ref: MessageRef, point: StoredPoint, thread_key: str | None, *, size: int
) -> list[Candidate]:
    """Nearest stored vectors (the message's own vector, not re-embedded)."""
    flt = VectorFilter(
        ref.mailbox_id,
        exclude_message_keys=(ref.message_key,),
        exclude_thread_keys=(thread_key,) if thread_key else (),
    )
    points = vector_search(backends, list(point.vector or []), flt, size)
    return [legs.from_point(p) for p in points]


@dataclass(frozen=True)
class LikedTerms:
    """A liked message's terms (field, term -> frequency in it), the candidates counted, and
    the counts' answer (how many of the mailbox's messages hold each): read once, shared by
    the body+subject and the subject-only rankings."""

    tf: dict[mlt.FieldTerm, int]
    chosen: list[mlt.FieldTerm]
    counts: dict[str, Any]


def liked_terms(
    backends: Backends, ref: MessageRef, liked_analyzer: str | None = None,
    fields: tuple[str, ...] = MLT_FIELDS,
) -> LikedTerms | None:
    """The liked message's own terms and their counts inside its mailbox (two requests:
    its term vectors, one ``filters`` count); None when it has no terms (or is gone)."""
    doc_id = point_id(ref)
    with naming("opensearch"):
        vectors = backends.opensearch.term_vectors(
            ref.mailbox_id, doc_id, mlt.term_vectors_request(doc_id, fields, liked_analyzer))
        tf = mlt.liked_terms(vectors)
        chosen = mlt.candidates(tf)
        if not chosen:
            return None
        counts = backends.opensearch.search_response(
            ref.mailbox_id, mlt.counts_body(ref.mailbox_id, chosen),
            budget_ms=backends.settings.search_timeout_ms)
    return LikedTerms(tf, chosen, counts)


def by_terms(
    backends: Backends,
    ref: MessageRef,
    thread_key: str | None,
    *,
    size: int,
    fields: tuple[str, ...] = MLT_FIELDS,
    liked_analyzer: str | None = None,
    liked: LikedTerms | None = None,
) -> list[Candidate]:
    """Messages sharing the liked message's most distinctive terms in ``fields``, chosen by
    counts taken inside its mailbox (:mod:`search_api.query.more_like_this`: nothing of
    another mailbox decides which terms, or their order); ``liked_analyzer``: the read
    index's analyzer for the message's own body, if it has one
    (:meth:`Backends.liked_body_analyzer`); ``liked``: the terms already read."""
    if liked is None:
        liked = liked_terms(backends, ref, liked_analyzer, fields)
    if liked is None:
        return []
    terms = [ft for ft in mlt.best_terms(liked.tf, liked.chosen, liked.counts)
             if ft[0] in fields]
    if not terms:
        return []
    body = mlt.terms_body(mailbox_id=ref.mailbox_id, doc_id=point_id(ref),
                          thread_key=thread_key, terms=terms, size=size)
    return legs.fulltext(backends, ref.mailbox_id, body)


def _term_rankings(
    backends: Backends, ref: MessageRef, thread_key: str | None, *, size: int, subject: bool
) -> tuple[list[Candidate], list[Candidate]]:
    """The body+subject ranking and (``subject``) the subject-only one, of one reading of the
    liked message's terms; the two final queries run side by side."""
    liked = liked_terms(backends, ref, backends.mapping.liked_body_analyzer())
    alone = (backends.concurrently(by_terms, backends, ref, thread_key, size=size,
                                   fields=("subject",), liked=liked) if subject else None)
    both = by_terms(backends, ref, thread_key, size=size, liked=liked)
    return both, alone.result() if alone else []


def similar(
    backends: Backends,
    ref: MessageRef,
    point: StoredPoint | None,
    *,
    limit: int,
    exclude_thread: str | None,
    method: Method = DEFAULT_METHOD,
    tuning: Tuning = DEFAULT_TUNING,
) -> list[Candidate]:
    """The best ``limit`` neighbours of a stored message; ``exclude_thread`` is the thread key
    to leave out (the message's own), or None; ``point`` the message's stored point (read
    once by the caller, who also takes its thread from it). A message without a vector (no
    ``forai``) gets no vector neighbours; hybrid then falls back to its terms."""
    depth = max(limit, tuning.depth) if method == "hybrid" else limit
    # The legs run side by side: the term queries on other threads, the vector leg here.
    terms = (backends.concurrently(_term_rankings, backends, ref, exclude_thread, size=depth,
                                   subject=method == "hybrid" and tuning.subject_weight > 0)
             if method != "vector" else None)
    vectors = (by_vector(backends, ref, point, exclude_thread, size=depth)
               if point is not None and method != "mlt" else [])
    if terms is None:
        return vectors
    both, subject = terms.result()
    if method == "mlt":
        return both[:limit]
    return fuse([vectors, both, subject], tuning)[:limit]


def fuse(rankings: list[list[Candidate]], tuning: Tuning) -> list[Candidate]:
    """The vector, body+subject and subject rankings fused (:func:`legs.fused`)."""
    return legs.fused(rankings, tuning.k,
                      [tuning.vector_weight, tuning.mlt_weight, tuning.subject_weight])
