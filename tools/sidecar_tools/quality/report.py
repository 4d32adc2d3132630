"""Plain-text and Markdown reports of query and similar-email evaluations."""

from __future__ import annotations

from collections.abc import Iterable

from sidecar_tools.quality.queries import QueryResult
from sidecar_tools.quality.similar import Score
from sidecar_tools.quality.suite import SuiteResult


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def query_line(result: QueryResult) -> str:
    spec = result.spec
    mark = "ok  " if result.passed else "FAIL"
    extra = f" rr={result.rr:.2f} ndcg@10={result.ndcg:.2f}" if spec.kind == "ranked" else ""
    unit = " [threads]" if spec.collapse else ""
    return (
        f"{mark} P={result.precision:.2f} R={result.recall:.2f}{extra} "
        f"n={len(result.found)}/{len(spec.expected)}{unit}  {spec.query}"
    )


def summary(suites: Iterable[SuiteResult]) -> tuple[list[str], bool]:
    """Report lines and whether every operator query was exact."""
    lines: list[str] = []
    ok = True
    for suite in suites:
        operators = [r for r in suite.results if r.spec.kind == "operator"]
        ranked = [r for r in suite.results if r.spec.kind == "ranked"]
        lines.append(f"== {suite.suite.name} ({suite.suite.mailbox})")
        lines += [query_line(r) for r in suite.results]
        passed = sum(r.passed for r in operators)
        mean_p = _mean([r.precision for r in operators])
        mean_r = _mean([r.recall for r in operators])
        lines.append(
            f"operator queries: {passed}/{len(operators)} exact; mean P={mean_p:.3f} R={mean_r:.3f}"
        )
        if ranked:
            lines.append(
                f"ranked queries: {len(ranked)}; MRR={_mean([r.rr for r in ranked]):.3f} "
                f"nDCG@10={_mean([r.ndcg for r in ranked]):.3f} "
                f"mean R={_mean([r.recall for r in ranked]):.3f}"
            )
        ok = ok and passed == len(operators)
    return lines, ok


def similar_table(scores: Iterable[Score], k: int, default: str) -> list[str]:
    """A Markdown table of same-thread recall@k, one row per variant."""
    lines = [f"| method | same-thread recall@{k} | messages asked |", "|---|---:|---:|"]
    for score in scores:
        name = score.variant.name + (
            " **(shipped default)**" if score.variant.name == default else ""
        )
        lines.append(f"| {name} | {score.recall:.3f} | {score.questions} |")
    return lines
