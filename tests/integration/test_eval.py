"""``sidecar eval`` against the real stack: the shipped query files pass, and the harness
can fail (a wrong expectation is reported as such)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from indexer.settings import Settings
from search_api.backends import Backends
from sidecar_tools.quality.corpus import read_corpus, sample_threads, write_corpus
from sidecar_tools.quality.local_index import eval_namespace
from sidecar_tools.quality.metrics import ndcg, precision, recall, recall_at, reciprocal_rank
from sidecar_tools.quality.queries import QuerySpec, load_queries, parse_spec
from sidecar_tools.quality.report import summary
from sidecar_tools.quality.suite import (
    DEFAULT_CORPORA,
    DEFAULT_SUITES,
    index_suites,
    judge_suite,
    load_suites,
)


def test_metrics() -> None:
    assert precision(["a", "b"], {"a"}) == 0.5
    assert recall(["a"], {"a", "b"}) == 0.5
    assert precision([], set()) == 1.0 and recall([], set()) == 1.0
    assert precision([], {"a"}) == 0.0
    assert reciprocal_rank(["x", "a"], {"a"}) == 0.5
    assert ndcg(["a", "b"], {"a", "b"}) == 1.0
    assert 0 < ndcg(["x", "a"], {"a"}) < 1
    assert recall_at(["a", "x", "b"], {"a", "b", "c"}, k=2) == 0.5


def test_sample_keeps_threads_whole() -> None:
    emails = [{"threadId": t, "n": i} for i, t in enumerate("aabbbcdd")]
    picked = sample_threads(emails, 6)
    assert [e["threadId"] for e in picked] == list("aabbbc")
    assert [e["threadId"] for e in sample_threads(emails, 4)] == ["a", "a"]


def test_shipped_query_files_are_well_formed() -> None:
    suites = load_suites(DEFAULT_SUITES, DEFAULT_CORPORA)
    specs = [spec for suite in suites for spec in load_queries(suite.queries)]
    assert len(specs) >= 40
    assert sum(s.kind == "operator" for s in specs) >= 40
    assert any(s.kind == "ranked" for s in specs) and any(s.collapse for s in specs)
    with pytest.raises(ValueError):
        parse_spec({"query": "x", "expected": [], "kind": "fuzzy"}, "here")


@pytest.mark.stack
@pytest.mark.slow
def test_eval_passes_shipped_queries_and_catches_a_wrong_one(
    settings: Settings, tmp_path: Path
) -> None:
    suites = load_suites(DEFAULT_SUITES, DEFAULT_CORPORA)
    with eval_namespace(settings, tmp_path) as ns:
        index_suites(ns, suites, tmp_path)
        backends = Backends(ns)
        results = [judge_suite(backends, suite) for suite in suites]
        lines, ok = summary(results)
        assert ok, "\n".join(line for line in lines if not line.startswith("ok"))
        ranked = [r for s in results for r in s.results if r.spec.kind == "ranked"]
        assert ranked and all(r.rr > 0 for r in ranked)
        # one expected id too many, one missing: the harness must say FAIL
        first = results[0].results[0].spec
        wrong = QuerySpec(first.query, (*first.expected[1:], "<not-a-message@x>"))
        bad = judge_suite(backends, suites[0], [wrong]).results[0]
        assert not bad.passed and bad.recall < 1.0 and bad.precision < 1.0


@pytest.mark.stack
@pytest.mark.slow
def test_cli_reports_and_exits_nonzero_on_failure(tmp_path: Path) -> None:
    from indexer.cli.main import app

    emails = read_corpus(DEFAULT_CORPORA / "notmuch-lkml.jsonl.gz")
    write_corpus(
        [e for e in emails if "keithp" in e["metadata"]["from"]["email"]], tmp_path / "k.gz"
    )
    right = {"query": "from:keithp", "expected": ["yunvdh3pfm9.fsf@aiko.keithp.com"]}
    wrong = {"query": "from:keithp.com", "expected": []}
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps(right) + "\n" + json.dumps(wrong) + "\n")
    suite = tmp_path / "suites.json"
    entry = {"name": "k", "corpus": "k.gz", "queries": "q.jsonl"}
    suite.write_text(json.dumps({"suites": [entry]}))
    args = ["eval", "--suites", str(suite), "--corpora", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.output and "1/2 exact" in result.output
