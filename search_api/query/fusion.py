"""Reciprocal rank fusion: merge full-text and semantic rankings without comparing scores.

BM25 scores and cosine similarities live on unrelated scales; RRF uses only ranks
(Cormack, Clarke & Büttcher, 2009): ``score(id) = sum_i w_i / (k + rank_i(id))`` with
1-based ranks, summed over the rankings that contain the id. ``k`` damps the head so one
list's first place cannot drown agreement between lists; 60 is the paper's value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class HybridTuning:
    """Knobs of hybrid search: candidates per engine, RRF ``k`` and weights, and how many of
    the free words the full-text leg needs (``any_words``, a ``minimum_should_match``; None:
    all of them, as full-text mode). Measured on the semantic query set (``docs/quality.md``)."""

    k: int = 60
    text_weight: float = 1.0
    vector_weight: float = 1.0
    text_depth: int = 100
    vector_depth: int = 200
    any_words: str | None = None


def rrf(
    rankings: Sequence[Sequence[str]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fused ``(id, score)`` pairs, best first.

    Ties (equal scores) go to the id with the better best rank, then to the smaller id,
    so the order is a pure function of the input and pages stay stable. An id repeated
    within one ranking counts at its first (best) position only. Scores are summed with
    ``math.fsum`` so equal sums compare equal whatever the order of the rankings.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError("weights needs one weight per ranking")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError("weights must be finite and >= 0")
    contributions: dict[str, list[float]] = {}
    best_rank: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            contributions.setdefault(item, []).append(weight / (k + rank))
            best_rank[item] = min(best_rank.get(item, rank), rank)
    scored = [(item, math.fsum(parts)) for item, parts in contributions.items()]
    scored.sort(key=lambda pair: (-pair[1], best_rank[pair[0]], pair[0]))
    return scored
