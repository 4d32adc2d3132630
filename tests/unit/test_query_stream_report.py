"""What ``sidecar bench-query-stream`` reads from the API's ``/metrics`` (pure: no service).

The expositions are written by prometheus-client itself, with the API's own bucket bounds,
so the parsing is tested against the text a real ``sidecar serve`` serves."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from sidecar_tools.bench.query_stream_report import (
    EMBEDS,
    REQUESTS,
    SEMANTIC,
    bucket_quantile,
    counter,
    delta,
    histogram,
    markdown,
    notes,
    server_side,
    summary,
)

API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)  # indexer.metrics


class ApiSeries:
    """A registry holding the API's four series the report reads (real client objects)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram("sidecar_api_request_seconds", "", ["route", "mode", "status"],
                                  buckets=API_BUCKETS, registry=self.registry)
        self.embeds = Histogram("sidecar_embed_seconds", "", registry=self.registry,
                                buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60))
        self.queries = Histogram("sidecar_query_encode_seconds", "", registry=self.registry,
                                 buckets=(0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05))
        self.applied = Counter("sidecar_worker_messages_total", "", ["stage", "outcome"],
                               registry=self.registry)

    def search(self, seconds: float, mode: str = "semantic", status: str = "200") -> None:
        self.requests.labels("/v1/mailboxes/{mailbox_id}/search", mode, status).observe(seconds)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def test_a_quantile_is_the_bucket_its_rank_falls_in() -> None:
    buckets = {0.01: 50.0, 0.025: 98.0, 0.05: 100.0, math.inf: 100.0}
    assert bucket_quantile(buckets, 50) == (0.0, 0.01)
    assert bucket_quantile(buckets, 95) == (0.01, 0.025)
    assert bucket_quantile(buckets, 99) == (0.025, 0.05)  # rank 99: past the 98 below 25 ms
    assert bucket_quantile(buckets, 100) == (0.025, 0.05)


def test_a_quantile_past_the_last_bound_has_no_upper_bound() -> None:
    assert bucket_quantile({0.5: 1.0, 1.0: 1.0, math.inf: 10.0}, 99) == (1.0, None)
    assert summary({0.5: 1.0, 1.0: 1.0, math.inf: 10.0})["p99_ms"] == [1000.0, None]


def test_nothing_observed_gives_no_quantile() -> None:
    assert bucket_quantile({}, 99) is None
    assert bucket_quantile({0.1: 0.0, math.inf: 0.0}, 99) is None
    assert summary({}) == {"n": 0}


def test_only_the_phase_between_two_scrapes_counts() -> None:
    """Observations before the first scrape (the seed, the warm-up) are not the phase's;
    a series that first appears in the phase counts from zero."""
    api = ApiSeries()
    for _ in range(100):
        api.search(2.0)  # slow, before the phase
    before = api.text()
    for _ in range(99):
        api.search(0.02)
    api.search(0.3)
    api.search(0.02, mode="fulltext")  # another mode: not the semantic figure
    api.search(0.02, status="503")  # an error answer: not a search's latency
    after = api.text()
    found = summary(delta(histogram(before, REQUESTS, SEMANTIC),
                          histogram(after, REQUESTS, SEMANTIC)))
    assert found["n"] == 100
    assert found["p50_ms"] == pytest.approx([10.0, 25.0])
    assert found["p99_ms"] == pytest.approx([10.0, 25.0])
    assert summary(delta({}, histogram(after, REQUESTS, {"mode": "fulltext"})))["n"] == 1


def test_the_api_view_of_a_phase() -> None:
    api = ApiSeries()
    api.applied.labels("vectors", "applied").inc(3)
    before = api.text()
    api.search(0.04)
    api.embeds.observe(0.02)
    api.embeds.observe(0.2)  # a document batch of the Edge consumer, in the same histogram
    api.queries.observe(0.012)
    api.applied.labels("vectors", "applied").inc(7)
    api.applied.labels("vectors", "retried").inc(2)
    found = server_side(before, api.text())
    assert found["semantic_request"]["n"] == 1
    assert found["semantic_request"]["p99_ms"] == pytest.approx([25.0, 50.0])
    assert found["embed_call"]["n"] == 2
    assert found["embed_call"]["p99_ms"] == pytest.approx([100.0, 250.0])
    assert found["query_encode"]["n"] == 1
    assert found["query_encode"]["p99_ms"] == pytest.approx([10.0, 15.0])
    assert found["vectors_applied_in_api"] == 7
    assert counter(api.text(), "sidecar_worker_messages_total", {"stage": "vectors"}) == 12
    assert histogram(api.text(), EMBEDS)[math.inf] == 2


def test_the_table_has_a_row_per_phase_and_says_what_the_buckets_mean() -> None:
    api = {"p50_ms": 20.0, "p95_ms": 30.0, "p99_ms": 40.0, "calls": 10, "errors": 0}
    own = {"semantic_request": {"n": 10, "p99_ms": [25.0, 50.0]},
           "query_encode": {"n": 10, "p99_ms": [7.5, 10.0]},
           "embed_call": {"n": 10, "p99_ms": [0.0, 50.0]}}
    result = {
        "clients": 8, "seconds": 5.0, "layout": "edge", "vector_store": "embedded",
        "searched_messages": 30, "rate": 2.0, "notes": list(notes("edge")),
        "phases": {
            "quiet": {"api": api, "server_side": own, "load_1m": [1.0, 1.5]},
            "stream": {"api": api, "server_side": {**own, "embed_call": {"n": 0}},
                       "load_1m": [1.5, 2.0], "indexed": {"fulltext": 10, "vectors": 9}},
        },
    }
    text = markdown(result)
    assert "| quiet | 10 | 0 | 20.0 | 30.0 | 40.0 | 25–50 | 7.5–10 | 0–50 | – / – |" in text
    assert "| stream |" in text and "| – | 10 / 9 |" in text
    assert "documents' batches" in text  # the Edge caveat
    assert not any("documents' batches" in n for n in notes("server"))
