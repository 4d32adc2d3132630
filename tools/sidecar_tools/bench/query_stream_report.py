"""What ``sidecar bench-query-stream`` reads from the API's own ``/metrics``, and its table.

The clients time every request themselves (exact percentiles). The API process also observes
its requests and its encoder calls in Prometheus histograms (``sidecar_api_request_seconds``,
``sidecar_embed_seconds``: :mod:`indexer.metrics`); the bench scrapes them before and after
each phase, and a quantile of the difference is only known to lie between two bucket bounds,
so it is reported as that interval ``(above, at_most]`` in ms, never as a point figure.

The query's encoding is ``sidecar_query_encode_seconds``: what each search waited for its
vector (the query encoder's queue and pass), with buckets around the issue's 30 ms target.
``sidecar_embed_seconds`` counts every embedding call of the process, so in the Edge layout
(the API consumes the vectors queue) it holds the documents' batches beside the queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

REQUESTS = "sidecar_api_request_seconds"
EMBEDS = "sidecar_embed_seconds"
QUERY_ENCODES = "sidecar_query_encode_seconds"
TASKS = "sidecar_worker_messages_total"
SEMANTIC = {"mode": "semantic", "status": "200"}
QUANTILES = (50, 95, 99)

Buckets = dict[float, float]  # upper bound (s, +inf last) -> cumulative count


def histogram(text: str, name: str, labels: Mapping[str, str] | None = None) -> Buckets:
    """The cumulative bucket counts of histogram ``name`` in an exposition ``text``, summed
    over its series whose labels include ``labels`` (empty: absent from the text)."""
    found: Buckets = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name != f"{name}_bucket":
                continue
            if any(sample.labels.get(k) != v for k, v in (labels or {}).items()):
                continue
            bound = float(sample.labels["le"])
            found[bound] = found.get(bound, 0.0) + sample.value
    return dict(sorted(found.items()))


def delta(before: Buckets, after: Buckets) -> Buckets:
    """The observations between two scrapes (a series absent before counted from zero)."""
    return {bound: count - before.get(bound, 0.0) for bound, count in after.items()}


def bucket_quantile(buckets: Buckets, q: float) -> tuple[float, float | None] | None:
    """The interval ``(above, at_most]`` (seconds) holding the ``q``-th percentile of
    cumulative ``buckets``; ``at_most`` None: above the last finite bound; None: nothing
    observed. The rank is nearest-rank, as :func:`sidecar_tools.bench.timing.percentile`."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = max(1, math.ceil(q / 100 * total))
    below = 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            return below, (None if math.isinf(bound) else bound)
        below = bound
    return below, None  # a cumulative count that never reaches its total: malformed, be safe


def summary(buckets: Buckets) -> dict[str, Any]:
    """``n`` and, per quantile, ``[above_ms, at_most_ms]`` (``at_most_ms`` null: beyond the
    last bound)."""
    total = buckets[max(buckets)] if buckets else 0.0
    found: dict[str, Any] = {"n": int(total)}
    for q in QUANTILES:
        interval = bucket_quantile(buckets, q)
        if interval is not None:
            above, at_most = interval
            found[f"p{q}_ms"] = [above * 1000, None if at_most is None else at_most * 1000]
    return found


def counter(text: str, name: str, labels: Mapping[str, str]) -> float:
    """The sum of counter ``name``'s series whose labels include ``labels``."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name != name.removesuffix("_total"):
            continue
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def server_side(before: str, after: str) -> dict[str, Any]:
    """The API process's own view of one phase, from two scrapes of its ``/metrics``."""
    return {
        "semantic_request": summary(delta(histogram(before, REQUESTS, SEMANTIC),
                                          histogram(after, REQUESTS, SEMANTIC))),
        "query_encode": summary(delta(histogram(before, QUERY_ENCODES),
                                      histogram(after, QUERY_ENCODES))),
        "embed_call": summary(delta(histogram(before, EMBEDS), histogram(after, EMBEDS))),
        "vectors_applied_in_api": counter(after, TASKS, {"stage": "vectors",
                                                         "outcome": "applied"})
        - counter(before, TASKS, {"stage": "vectors", "outcome": "applied"}),
    }


def _interval(found: Mapping[str, Any], key: str) -> str:
    pair = found.get(key)
    if not pair:
        return "–"
    above, at_most = pair
    return f"> {above:g}" if at_most is None else f"{above:g}–{at_most:g}"


def markdown(result: Mapping[str, Any]) -> str:
    """One row per phase: the clients' exact figures, then the API's bucket intervals."""
    lines = [
        f"semantic search, {result['clients']} clients, {result['seconds']:g} s per phase, "
        f"layout {result['layout']} ({result['vector_store']}), mailbox of "
        f"{result['searched_messages']} messages; stream at {result['rate']:g} msgs/s",
        "",
        "| phase | calls | errors | p50 ms | p95 ms | p99 ms | API p99 ms (buckets) "
        "| query encoding p99 ms (buckets) | embed call p99 ms (buckets) "
        "| indexed full text / vectors | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, phase in result["phases"].items():
        api, own = phase["api"], phase["server_side"]
        indexed = phase.get("indexed") or {}
        lines.append(
            f"| {name} | {api['calls']} | {api['errors']} | {api['p50_ms']:.1f} "
            f"| {api['p95_ms']:.1f} | {api['p99_ms']:.1f} "
            f"| {_interval(own['semantic_request'], 'p99_ms')} "
            f"| {_interval(own.get('query_encode', {}), 'p99_ms')} "
            f"| {_interval(own['embed_call'], 'p99_ms')} "
            f"| {indexed.get('fulltext', '–')} / {indexed.get('vectors', '–')} "
            f"| {' → '.join(f'{x:.1f}' for x in phase['load_1m'])} |")
    lines += ["", *(f"- {note}" for note in result.get("notes", []))]
    return "\n".join(lines)


def notes(layout: str) -> Sequence[str]:
    """What the API-side columns can and cannot say in this layout."""
    found = [
        "API and embed columns: the API process's histograms, differenced per phase; a "
        "quantile is only known to lie within a bucket (`above–at_most` ms).",
        "Query encoding: `sidecar_query_encode_seconds`, what each search waited for its "
        "vector (the query encoder's queue and pass); embed call: `sidecar_embed_seconds`, "
        "every embedding call of the API process (one call may encode several queries).",
    ]
    if layout == "edge":
        found.append("Edge: the API process also consumes the vectors queue, so its embed "
                     "calls in the stream phase include the documents' batches.")
    return found
