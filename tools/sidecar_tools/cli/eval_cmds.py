"""CLI: ``sidecar eval`` (query files over corpora) and ``sidecar eval-similar``."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from indexer.settings import get_settings

Corpora = Annotated[
    Path, typer.Option(help="Folder of the corpora named by the suites "
                       "(default: tests/data/corpora).")
]


def _eval_semantic(
    suites: Path | None, corpora: Path | None, only: list[str] | None, keep: bool,
    tune: bool = False,
) -> None:
    """``sidecar eval --semantic``: the semantic query set per mode and half (a table); with
    ``--tune`` also the hybrid tunings tried on the tune half (a second table)."""
    from search_api.backends import Backends
    from sidecar_tools.quality import hybrid_tune
    from sidecar_tools.quality import suite as suites_mod
    from sidecar_tools.quality.local_index import eval_namespace
    from sidecar_tools.quality.modes import mode_table, score_suite

    chosen = suites_mod.load_suites(
        suites or suites_mod.DEFAULT_SUITES.with_name("semantic-suites.json"),
        corpora or suites_mod.DEFAULT_CORPORA,
    )
    chosen = [s for s in chosen if not only or s.name in only]
    with (
        tempfile.TemporaryDirectory(prefix="sidecar-eval-") as tmp,
        eval_namespace(get_settings(), Path(tmp), keep=keep) as settings,
    ):
        suites_mod.index_suites(settings, chosen, Path(tmp))
        backends = Backends(settings)
        scores = [row for s in chosen for row in score_suite(backends, s)]
        legs = [leg for s in chosen for leg in hybrid_tune.fetch_legs(backends, s)] if tune else []
    typer.echo("\n".join(mode_table(scores)))
    if tune:
        typer.echo("\n" + "\n".join(hybrid_tune.tune_table(*hybrid_tune.tune(legs))))


def eval_queries(
    suites: Annotated[Path | None, typer.Option(help="Suites file (eval/suites.json).")] = None,
    corpora: Corpora | None = None,
    only: Annotated[list[str] | None, typer.Option(help="Run only these suites.")] = None,
    keep: Annotated[bool, typer.Option(help="Keep the evaluation table and indexes.")] = False,
    semantic: Annotated[bool, typer.Option(
        "--semantic",
        help="Run the semantic query set (eval_data/semantic-suites.json) in every mode and "
             "report nDCG@10 and recall@10 per mode and half (tune / held-out check).",
    )] = False,
    tune: Annotated[bool, typer.Option(
        "--tune",
        help="--semantic: also try hybrid tunings (RRF k, weights, depth, words needed) and "
             "rank them on the tune half, with the held-out check half beside each.",
    )] = False,
) -> None:
    """Load each suite's corpus into a throwaway namespace, index it, run its query file and
    report precision/recall per query (MRR and nDCG@10 for ranked ones). Exit 1 unless every
    operator query is exact."""
    if semantic:
        _eval_semantic(suites, corpora, only, keep, tune)
        return
    from search_api.backends import Backends
    from sidecar_tools.quality import suite as suites_mod
    from sidecar_tools.quality.local_index import eval_namespace
    from sidecar_tools.quality.report import summary

    chosen = suites_mod.load_suites(
        suites or suites_mod.DEFAULT_SUITES, corpora or suites_mod.DEFAULT_CORPORA
    )
    chosen = [s for s in chosen if not only or s.name in only]
    with (
        tempfile.TemporaryDirectory(prefix="sidecar-eval-") as tmp,
        eval_namespace(get_settings(), Path(tmp), keep=keep) as settings,
    ):
        suites_mod.index_suites(settings, chosen, Path(tmp))
        backends = Backends(settings)
        lines, ok = summary(suites_mod.judge_suite(backends, s) for s in chosen)
    typer.echo("\n".join(lines))
    raise typer.Exit(0 if ok else 1)


def eval_similar(
    corpus: Annotated[
        Path | None, typer.Option(help="Default: linux-mips-4k in --corpora.")
    ] = None,
    corpora: Corpora | None = None,
    sample: Annotated[int, typer.Option(help="Whole-thread sample size (messages).")] = 300,
    k: Annotated[int, typer.Option(help="Cut-off of recall@k.")] = 10,
    max_tokens: Annotated[
        int | None, typer.Option(help="Encoder truncation (default: SIDECAR_EMBED_MAX_TOKENS).")
    ] = None,
) -> None:
    """Same-thread recall@k of "similar emails" (exclude_thread=false) for the vector search,
    more_like_this, and hybrid variants; prints a Markdown table."""
    from sidecar_tools.quality.local_index import eval_namespace
    from sidecar_tools.quality.report import similar_table
    from sidecar_tools.quality.similar_run import measure

    source = corpus or (corpora or _default_corpora()) / "linux-mips-4k.jsonl.gz"
    base = get_settings()
    if max_tokens is not None:
        base = base.model_copy(update={"embed_max_tokens": max_tokens})
    with (
        tempfile.TemporaryDirectory(prefix="sidecar-eval-") as tmp,
        eval_namespace(base, Path(tmp)) as settings,
    ):
        scores, default = measure(settings, source, sample, k, Path(tmp))
    typer.echo("\n".join(similar_table(scores, k, default)))


def _default_corpora() -> Path:
    from sidecar_tools.quality.suite import DEFAULT_CORPORA

    return DEFAULT_CORPORA


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_queries)
    app.command("eval-similar")(eval_similar)
