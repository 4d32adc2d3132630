"""Retrieval metrics, pure: set precision/recall for operator queries, MRR and nDCG for
ranked ones, and recall@k for "similar emails"."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence


def precision(found: Collection[str], expected: Collection[str]) -> float:
    """Share of what was returned that was expected (1.0 when nothing was returned and
    nothing was expected: an empty answer to a query that should match nothing is right)."""
    if not found:
        return 1.0 if not expected else 0.0
    return len(set(found) & set(expected)) / len(set(found))


def recall(found: Collection[str], expected: Collection[str]) -> float:
    """Share of the expected results that were returned (1.0 when none were expected)."""
    if not expected:
        return 1.0
    return len(set(found) & set(expected)) / len(set(expected))


def reciprocal_rank(ranking: Sequence[str], relevant: Collection[str]) -> float:
    """1 / rank of the first relevant result (0 when none is returned)."""
    for rank, item in enumerate(ranking, start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def ndcg(ranking: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k: the ranking's DCG over the best possible DCG."""
    gains = [
        1.0 / math.log2(rank + 1) for rank, item in enumerate(ranking[:k], 1) if item in relevant
    ]
    ideal = [1.0 / math.log2(rank + 1) for rank in range(1, min(k, len(relevant)) + 1)]
    return math.fsum(gains) / math.fsum(ideal) if ideal else 1.0


def recall_at(ranking: Sequence[str], relevant: Collection[str], k: int = 10) -> float:
    """Share of the relevant items in the top ``k``, out of the most that could fit there."""
    if not relevant:
        return 1.0
    hits = len(set(ranking[:k]) & set(relevant))
    return hits / min(k, len(set(relevant)))
