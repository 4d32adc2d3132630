"""Same-thread recall@k of "similar emails": does a message find its own thread-mates?

On real mailing-list threads, the other messages of a thread are the clearest "similar"
messages a corpus offers without hand labels. For every message of a thread with at least
two messages, the method ranks the mailbox (``exclude_thread=false``, never the message
itself) and recall@k counts its thread-mates in the top k, out of ``min(k, mates)``; the
score is the mean over messages. Messages without a vector (no ``forai``) are skipped for
every method alike, so all methods answer the same questions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from indexer.core.plan import MessageRef
from search_api.backends import Backends
from search_api.similar import DEFAULT_TUNING, Method, Tuning, similar
from search_api.vector_search import own_point
from sidecar_tools.quality.metrics import recall_at


@dataclass(frozen=True)
class Variant:
    """One row of the table: a method and its tuning."""

    name: str
    method: Method
    tuning: Tuning = DEFAULT_TUNING


@dataclass(frozen=True)
class Score:
    variant: Variant
    recall: float
    questions: int


def threads_of(keys_to_threads: dict[str, str]) -> dict[str, list[str]]:
    """thread -> its message keys, only threads of at least two messages."""
    threads: dict[str, list[str]] = defaultdict(list)
    for key, thread in sorted(keys_to_threads.items()):
        threads[thread].append(key)
    return {t: keys for t, keys in threads.items() if len(keys) > 1}


def questions(backends: Backends, mailbox: str, keys_to_threads: dict[str, str]) -> list[str]:
    """Message keys to ask about: in a multi-message thread, and with a stored vector."""
    keys = [k for members in threads_of(keys_to_threads).values() for k in members]
    return [k for k in keys if own_point(backends, MessageRef(mailbox, k)) is not None]


def same_thread_recall(
    backends: Backends,
    mailbox: str,
    keys_to_threads: dict[str, str],
    asked: Iterable[str],
    variant: Variant,
    k: int = 10,
) -> Score:
    """Mean recall@k of thread-mates over the asked messages, for one variant."""
    mates = threads_of(keys_to_threads)
    scores: list[float] = []
    for key in asked:
        thread = keys_to_threads[key]
        ref = MessageRef(mailbox, key)
        ranked = similar(
            backends,
            ref,
            own_point(backends, ref),
            limit=k,
            exclude_thread=None,
            method=variant.method,
            tuning=variant.tuning,
        )
        relevant = {m for m in mates[thread] if m != key}
        scores.append(recall_at([c.message_key for c in ranked], relevant, k))
    mean = sum(scores) / len(scores) if scores else 0.0
    return Score(variant, mean, len(scores))


def default_variants(max_tokens: int = 256, recipe: str = "subject-forai") -> list[Variant]:
    """What the table compares: each engine alone, then fused with a few cheap tunings
    (``recipe``: the embedded text, named in the vector row)."""
    return [
        Variant(f"vector ({recipe}, MiniLM, {max_tokens} tokens)", "vector"),
        Variant("more_like_this (subject+clean)", "mlt"),
        Variant("hybrid: vector + mlt, RRF k=60, depth 50", "hybrid", _two(k=60, depth=50)),
        Variant("hybrid: vector + mlt, RRF k=10, depth 20", "hybrid", _two(k=10, depth=20)),
        Variant(
            "hybrid: + mlt(subject), k=60, depth 50, equal weights", "hybrid", _three(1.0, 60, 50)
        ),
        Variant(
            "hybrid: + mlt(subject), k=10, depth 20, equal weights", "hybrid", _three(1.0, 10, 20)
        ),
        Variant(
            "hybrid: + mlt(subject), k=60, depth 20, vector 0.5", "hybrid", _three(0.5, 60, 20)
        ),
        Variant(
            "hybrid: + mlt(subject), k=10, depth 20, vector 0.5", "hybrid", _three(0.5, 10, 20)
        ),
        Variant("terms only: mlt + mlt(subject), k=10, depth 20", "hybrid", _three(0.0, 10, 20)),
    ]


def _two(*, k: int, depth: int) -> Tuning:
    return Tuning(depth=depth, k=k, vector_weight=1.0, mlt_weight=1.0, subject_weight=0.0)


def _three(vector_weight: float, k: int, depth: int) -> Tuning:
    return Tuning(depth=depth, k=k, vector_weight=vector_weight, subject_weight=1.0)
