"""Smoke run of ``sidecar bench`` at 200 messages: every stage runs on the real stack and its
figures are consistent, so the harness cannot rot; it compares the other encoder runtime too
(``--compare-runtime``: one more worker start and 200-message pipeline, ~30 s on 2 cores). (Ratios are not asserted: 200 messages on a
shared machine say nothing about targets; ``docs/results/runs/`` hold full runs.)"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from indexer.settings import Settings
from sidecar_tools.bench import runtimes
from sidecar_tools.bench.corpus import generated_emails, select
from sidecar_tools.bench.report import markdown, plain, targets
from sidecar_tools.bench.run import Options, run
from sidecar_tools.bench.timing import percentile
from tests.conftest import CORPORA
from tests.support.api_fixtures import free_port

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.timeout(900)]
MESSAGES = 200
# Real list mail the suite ships (the benches' own default reads ../shared when present).
REAL_MAIL = CORPORA / "linux-mips-4k.jsonl.gz"


def test_percentile_is_an_observation() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0 and math.isnan(percentile([], 50))


def test_generated_corpus_replays_into_mailboxes(tmp_path: Path) -> None:
    assert len(list(generated_emails(10))) == 10
    chosen = select(None, 25, tmp_path)
    assert chosen.source == "generated" and len(chosen.files) == 1
    # More messages than the corpus: the rest goes to further mailboxes, same key each time.
    corpus = tmp_path / "small.jsonl"
    corpus.write_text(chosen.files["bench-0@example.org"].read_text().split("\n", 10)[0] + "\n")
    replayed = select(corpus, 3, tmp_path / "r")
    assert sorted(replayed.files) == [f"bench-{n}@example.org" for n in range(3)]
    assert select(corpus, 3, tmp_path / "r").key == replayed.key


def test_bench_smoke(settings: Settings, tmp_path: Path) -> None:
    opts = Options(
        corpus=REAL_MAIL,
        messages=MESSAGES,
        naive_messages=20,
        search_seconds=1.0,
        raw_seconds=0.5,
        clients=4,
        api_port=free_port(),
        workdir=Path(".sidecar/bench"),  # the loaded table is reused across runs
        encoder_texts=60,  # a rate; two runtimes measure it
        compare_runtime=runtimes.other(settings.embed_runtime),
        cost_messages=10,  # the bill per path, on as many messages (test_bench_cost bounds it)
    )
    lines: list[str] = []
    result = plain(run(opts, settings, lines.append))
    assert result["cost"]["messages"] == 10 and set(result["cost"]["paths"]) == {
        "live", "live_sharded", "redelivery", "export", "scan"}
    assert "| M1: " in markdown(result)
    pipe = result["pipeline"]
    assert pipe["pipeline"]["messages"] == MESSAGES
    assert pipe["pipeline"]["dead_lettered"] == 0
    assert pipe["pipeline"]["embedded"] > 0
    assert pipe["pipeline"]["searchable_s"] is not None
    # The workers time their batches; the embedder's share is part of the vectors stage's time.
    stages = pipe["pipeline"]["stage_s"]
    assert stages["fulltext"] > 0 and stages["vectors"] > 0
    assert 0 < pipe["pipeline"]["embed_s"] <= stages["vectors"]
    assert pipe["pipeline"]["vectors_own_s"] >= 0
    assert pipe["redelivery"]["embedded"] == 0  # re-delivery embeds nothing
    assert pipe["redelivery"]["applied"] == pipe["pipeline"]["applied"]
    assert pipe["fulltext_only"]["searchable_s"] is not None
    assert result["limits"]["indexed_documents"] == MESSAGES
    assert result["limits"]["encoder"]["per_s"] > 0 and result["limits"]["bulk"]["per_s"] > 0
    assert result["peers"]["naive"]["items"] == 20
    for mode, lat in result["search"]["api"].items():
        assert lat["calls"] > 0 and lat["errors"] == 0, (mode, lat)
    assert all(lat["calls"] > 0 for lat in result["search"]["raw"].values())
    assert min(pipe["worker_rss_mib"].values()) > 0 and result["search"]["api_rss_mib"] > 0
    assert {t.name for t in targets(result)} >= {
        "pipeline / encoder limit",
        "pipeline / naive peer",
    }
    assert "| pipeline, both indexes (msgs/s) |" in markdown(result)
    _assert_runtimes(result, settings.embed_runtime)


def _assert_runtimes(result: dict[str, Any], own: str) -> None:
    """One row per runtime: this run's repeats its own figures, the other's were measured on
    the same texts and a pipeline of its own (a fresh namespace: every text embedded again)."""
    first, second = result["runtimes"]
    assert (first["runtime"], second["runtime"]) == (own, runtimes.other(own))
    assert first["encoder_texts_per_s"] == result["limits"]["encoder"]["per_s"]
    assert first["pipeline_messages_per_s"] == result["pipeline"]["pipeline"]["messages_per_s"]
    assert second["encoder_texts"] == first["encoder_texts"] == 60
    assert second["embed_s"] > 0 and second["workers_warm_s"] > 0
    table = markdown(result)
    for row in (first, second):
        assert row["encoder_texts_per_s"] > 0 and row["pipeline_messages_per_s"] > 0
        ratio = row["pipeline_messages_per_s"] / row["encoder_texts_per_s"]
        assert math.isclose(row["pipeline_per_encoder"], ratio, rel_tol=0.01, abs_tol=0.002), row
        assert f"| {row['runtime']} | {row['dtype']} | {row['encoder_texts_per_s']:,.1f} " in table


def _bench_scale_smoke(settings: Settings, *, server: bool) -> dict[str, Any]:
    """``sidecar bench-scale`` at 60 messages x 3: the engines hold every copy, and the API,
    measured over them, answers every mode without error."""
    from sidecar_tools.bench.scale import ScaleOptions
    from sidecar_tools.bench.scale import run as run_scale

    opts = ScaleOptions(REAL_MAIL, 60, copies=2, search_seconds=1.0, clients=2, raw_seconds=0.5,
                        workdir=Path(".sidecar/bench"), server=server)
    result: dict[str, Any] = plain(run_scale(opts, settings, lambda line: None))
    assert result["pipeline"]["dead_lettered"] == 0
    assert result["indexed_documents"] == 60 * 3 == 60 + result["documents_copied"]
    assert result["points_copied"] == 2 * result["points_original"] > 0
    for mode, lat in result["api"].items():
        assert lat["calls"] > 0 and lat["errors"] == 0, mode
    for call, lat in result["raw"].items():  # the engine calls the overhead target subtracts
        assert lat["calls"] > 0 and lat["errors"] == 0, call
    return result


def test_bench_scale_smoke(settings: Settings) -> None:
    """The embedded (Edge) layout alone: what a clone without a Qdrant server measures."""
    _bench_scale_smoke(settings, server=False)


@pytest.mark.qdrant_server
def test_bench_scale_smoke_beside_a_qdrant_server(settings: Settings) -> None:
    """Both layouts, the server's figures beside the embedded ones."""
    _bench_scale_smoke(settings, server=True)
