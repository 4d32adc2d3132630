"""Tune hybrid search on the semantic query set's ``tune`` half; report both halves.

Each query's legs are fetched once at the largest depth tried — the semantic ranking, and the
full-text ranking for every ``any_words`` tried (None: all words, as full-text mode) — and
every tuning of the grid is then the very fusion the API runs
(:func:`search_api.service.fuse`) over those lists, so the grid costs no further engine calls.
The choice maximises mean nDCG@10 over the ``tune`` queries of all suites together; the
held-out ``check`` half is reported beside it and never used to choose.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from search_api import candidates, service
from search_api.backends import Backends
from search_api.query import HybridTuning, parse
from sidecar_tools.quality.metrics import ndcg, recall_at
from sidecar_tools.quality.queries import Identities, load_queries
from sidecar_tools.quality.suite import Suite

GRID_K = (5, 10, 30, 60)
GRID_WEIGHTS = ((1.0, 1.0), (0.5, 1.0), (0.25, 1.0), (1.0, 0.5))  # (full text, vector)
GRID_DEPTH = (20, 50, 100)  # candidates of each leg
GRID_ANY_WORDS: tuple[str | None, ...] = (None, "1", "2<30%", "2<50%")
HALVES = ("tune", "check")


@dataclass(frozen=True)
class Legs:
    """One query's two rankings, at the largest depth tried."""

    suite: str
    half: str
    relevant: frozenset[str]
    ids: Identities
    text: dict[str | None, list[candidates.Candidate]]
    vector: list[candidates.Candidate]


@dataclass(frozen=True)
class Row:
    """A tuning and its mean nDCG@10 / recall@10 per half (all suites' queries together)."""

    tuning: HybridTuning
    ndcg: dict[str, float]
    recall: dict[str, float]


def fetch_legs(backends: Backends, suite: Suite) -> list[Legs]:
    """Both legs of every query of the suite (one engine round per leg and ``any_words``)."""
    ids = Identities.of_mailbox(backends, suite.mailbox)
    depth = max(*GRID_DEPTH, service.HYBRID.text_depth, service.HYBRID.vector_depth)
    legs = []
    for spec in load_queries(suite.queries):
        node = parse(spec.query)
        text = {
            words: candidates.fulltext(backends, suite.mailbox, candidates.fulltext_body(
                suite.mailbox, node, size=depth, by_date=False, any_words=words,
            ))
            for words in GRID_ANY_WORDS
        }
        vector = candidates.semantic(backends, suite.mailbox, node, depth)
        legs.append(Legs(suite.name, spec.half, frozenset(spec.expected), ids, text, vector))
    return legs


def grid() -> list[HybridTuning]:
    """Every tuning tried, the shipped default first."""
    tried = [
        HybridTuning(k, text_weight=tw, vector_weight=vw, text_depth=d, vector_depth=d,
                     any_words=words)
        for k, (tw, vw), d, words in itertools.product(
            GRID_K, GRID_WEIGHTS, GRID_DEPTH, GRID_ANY_WORDS
        )
    ]
    return [service.HYBRID, *(t for t in tried if t != service.HYBRID)]


def score(legs: Sequence[Legs], tuning: HybridTuning) -> Row:
    """Mean nDCG@10 and recall@10 of ``tuning`` per half."""
    got: dict[str, list[tuple[float, float]]] = {half: [] for half in HALVES}
    for leg in legs:
        fused = service.fuse(leg.text[tuning.any_words], leg.vector, tuning)
        found = [leg.ids.by_key[c.message_key][0] for c in fused]
        got[leg.half].append((ndcg(found, leg.relevant), recall_at(found, leg.relevant, 10)))
    return Row(
        tuning,
        {h: _mean(n for n, _ in got[h]) for h in HALVES},
        {h: _mean(r for _, r in got[h]) for h in HALVES},
    )


def tune(legs: Sequence[Legs]) -> tuple[Row, Row, list[Row]]:
    """(the shipped default's row, the best row on the tune half, every row best first).

    Ties on the tune half go to the earlier tuning of :func:`grid` (the default first)."""
    rows = [score(legs, t) for t in grid()]
    ranked = sorted(rows, key=lambda r: -r.ndcg["tune"])  # stable: grid order breaks ties
    return rows[0], ranked[0], ranked


def tune_table(default: Row, best: Row, ranked: Iterable[Row], top: int = 10) -> list[str]:
    """A Markdown table: the default, the chosen tuning and the best ``top`` on the tune half."""
    lines = [
        "| tuning | k | weights text / vector | depth | any words | tune nDCG@10 / R@10 | "
        "check nDCG@10 / R@10 |",
        "|---|---:|---|---:|---|---|---|",
    ]
    named = [("shipped default", default), ("best on tune", best)]
    named += [(f"#{n}", row) for n, row in enumerate(list(ranked)[:top], 1)]
    for name, row in named:
        t = row.tuning
        depth = f"{t.text_depth} / {t.vector_depth}"
        lines.append(
            f"| {name} | {t.k} | {t.text_weight:g} / {t.vector_weight:g} | {depth} | "
            f"{t.any_words or 'all'} | {row.ndcg['tune']:.3f} / {row.recall['tune']:.3f} | "
            f"{row.ndcg['check']:.3f} / {row.recall['check']:.3f} |"
        )
    return lines


def _mean(values: Iterable[float]) -> float:
    found = list(values)
    return sum(found) / len(found) if found else 0.0
