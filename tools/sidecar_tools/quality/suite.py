"""Evaluation suites: which corpus (or whole-thread sample of it) each query file is judged on.

``eval/suites.json`` lists ``{"name", "corpus", "sample", "queries"}``; ``corpus`` is relative
to the corpora folder (``tests/data/corpora`` of the checkout by default), ``queries`` to
the repository. Every suite gets its own mailbox in one throwaway namespace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from indexer.settings import Settings
from search_api.backends import Backends
from sidecar_tools.quality.corpus import corpus_file
from sidecar_tools.quality.local_index import index_table, load_corpus
from sidecar_tools.quality.queries import (
    Identities,
    QueryResult,
    QuerySpec,
    load_queries,
    run_query,
)

DEFAULT_SUITES = Path(__file__).resolve().parents[1] / "eval_data" / "suites.json"
# The eval suites' corpora ship in the checkout (tests/data/corpora, with their provenance);
# users pass --corpora for their own.
DEFAULT_CORPORA = Path(__file__).resolve().parents[3] / "tests" / "data" / "corpora"


@dataclass(frozen=True)
class Suite:
    name: str
    corpus: Path
    queries: Path
    sample: int | None = None

    @property
    def mailbox(self) -> str:
        return f"{self.name}@eval.invalid"


def load_suites(path: Path, corpora: Path) -> list[Suite]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [
        Suite(
            name=str(entry["name"]),
            corpus=corpora / str(entry["corpus"]),
            queries=(path.parent / str(entry["queries"])).resolve(),
            sample=int(entry["sample"]) if entry.get("sample") is not None else None,
        )
        for entry in raw["suites"]
    ]


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    results: list[QueryResult]


def index_suites(settings: Settings, suites: list[Suite], workdir: Path) -> None:
    """Store every suite's corpus (or its whole-thread sample) in its mailbox, then index the
    table once (one stream export, each record applied once)."""
    for suite in suites:
        load_corpus(settings, corpus_file(suite.corpus, suite.sample, workdir), suite.mailbox)
    index_table(settings, workdir)


def judge_suite(
    backends: Backends, suite: Suite, specs: list[QuerySpec] | None = None
) -> SuiteResult:
    """Run the suite's queries against its (already indexed) mailbox."""
    ids = Identities.of_mailbox(backends, suite.mailbox)
    specs = load_queries(suite.queries) if specs is None else specs
    return SuiteResult(suite, [run_query(backends, suite.mailbox, ids, s) for s in specs])
