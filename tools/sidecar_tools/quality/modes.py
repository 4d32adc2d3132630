"""The semantic query set, judged per mode: every query runs as full text, semantic and hybrid,
and nDCG@10 / recall@10 are averaged per mode and per half (``tune`` / held-out ``check``)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import get_args

from search_api.backends import Backends
from search_api.service import MODES, Mode
from sidecar_tools.quality.metrics import ndcg, recall_at
from sidecar_tools.quality.queries import Identities, load_queries, run_query
from sidecar_tools.quality.suite import Suite

ORDER: tuple[str, ...] = get_args(Mode)  # the service's order: full text first


@dataclass(frozen=True)
class ModeScore:
    suite: str
    half: str
    mode: str
    ndcg10: float
    recall10: float
    queries: int


def score_suite(backends: Backends, suite: Suite) -> list[ModeScore]:
    """Mean nDCG@10 and recall@10 of the suite's queries, per half and mode."""
    ids = Identities.of_mailbox(backends, suite.mailbox)
    rows: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for spec in load_queries(suite.queries):
        for mode in ORDER:
            assert mode in MODES
            result = run_query(backends, suite.mailbox, ids, dataclasses.replace(spec, mode=mode))
            found, relevant = list(result.found), set(spec.expected)
            score = (ndcg(found, relevant), recall_at(found, relevant, 10))
            for half in (spec.half, "all") if spec.half else ("all",):
                rows[(half, mode)].append(score)
    return [
        ModeScore(suite.name, half, mode, _mean(s[0] for s in scores),
                  _mean(s[1] for s in scores), len(scores))
        for (half, mode), scores in sorted(rows.items(), key=lambda kv: _order(kv[0]))
    ]


def _order(key: tuple[str, str]) -> tuple[int, int]:
    half, mode = key
    return ({"tune": 0, "check": 1}.get(half, 2), ORDER.index(mode))


def _mean(values: Iterable[float]) -> float:
    found = list(values)
    return sum(found) / len(found) if found else 0.0


def mode_table(scores: Iterable[ModeScore]) -> list[str]:
    """A Markdown table: one row per suite, half and mode."""
    lines = ["| suite | half | mode | nDCG@10 | recall@10 | queries |",
             "|---|---|---|---:|---:|---:|"]
    lines += [f"| {s.suite} | {s.half} | {s.mode} | {s.ndcg10:.3f} | {s.recall10:.3f} | "
              f"{s.queries} |" for s in scores]
    return lines
