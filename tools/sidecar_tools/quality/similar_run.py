"""Index a whole-thread sample and score every "similar emails" variant on it."""

from __future__ import annotations

from pathlib import Path

from indexer.settings import Settings
from search_api.backends import Backends
from search_api.similar import DEFAULT_METHOD, DEFAULT_TUNING
from sidecar_tools.quality.corpus import corpus_file
from sidecar_tools.quality.local_index import index_corpus
from sidecar_tools.quality.queries import Identities
from sidecar_tools.quality.similar import (
    Score,
    Variant,
    default_variants,
    questions,
    same_thread_recall,
)

MAILBOX = "similar@eval.invalid"


def default_name(variants: list[Variant]) -> str:
    """The row that is what the API ships."""
    for variant in variants:
        if variant.method == DEFAULT_METHOD and variant.tuning == DEFAULT_TUNING:
            return variant.name
    return ""


def measure(
    settings: Settings, corpus: Path, sample: int, k: int, workdir: Path
) -> tuple[list[Score], str]:
    """Scores of every default variant on the same asked messages, and the shipped row's name."""
    index_corpus(settings, corpus_file(corpus, sample, workdir), MAILBOX, workdir)
    backends = Backends(settings)
    ids = Identities.of_mailbox(backends, MAILBOX)
    threads = {key: thread for key, (_, thread) in ids.by_key.items()}
    asked = questions(backends, MAILBOX, threads)
    variants = default_variants(settings.embed_max_tokens, settings.embed_recipe)
    scores = [same_thread_recall(backends, MAILBOX, threads, asked, v, k) for v in variants]
    return scores, default_name(variants)
