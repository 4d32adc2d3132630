"""A change of embedded text, then of model, end to end: mail indexed with the shipped MiniLM
and the default recipe (subject-forai); ``sidecar reindex --vectors --recipe forai`` and back
with ``sidecar reindex --vectors`` (the commands as docs/encoder.md writes them), searching in
between; then ``reindex --vectors --model`` to a second model the test builds (a tiny random
BERT, 48 dimensions), semantic searches answered with the new model's vectors, then rolled back
to MiniLM. The stored MiniLM vectors are checked to be the embedding of the subject-forai text.

The embedded store is owned by ``sidecar serve`` (started with ``SIDECAR_EMBED_MODELS`` naming
the second model, so it can embed for both collections); the reindex drives it through the
vectors queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.embedding.embedder import DIMENSION, build_embedder
from indexer.adapters.factories import vector_slug
from indexer.adapters.qdrant.index import build_store
from indexer.core.documents import text_hash
from indexer.core.recipes import Recipe, embedded_text
from indexer.ops import reindex_vectors as ops
from indexer.ops.reindex import ReindexError
from indexer.settings import Settings, to_env
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.conftest import CORPORA
from tests.support.api_fixtures import index_all, start_api
from tests.support.mail_helpers import corpus
from tests.support.model_helpers import TINY_DIM, build_tiny_model
from tests.support.pipeline_helpers import prepare_tables, wait_until

pytestmark = [pytest.mark.stack, pytest.mark.slow]

BOX, OTHER = "models@example.com", "nobody@example.com"
QUERY = "local caching for the cifs file system"


def _keys(api: object, q: str) -> list[str]:
    response = api.search(q, mode="semantic", limit=10)  # type: ignore[attr-defined]
    assert response.status_code == 200, response.text
    return [h["message_key"] for h in response.json()["hits"]]


def _texts(emails: list[dict[str, Any]], recipe: Recipe) -> dict[str, str]:
    """The embedded text of each message under ``recipe``, by message key."""
    texts = {}
    for email in emails:
        message = to_items(email, BOX).message
        text = embedded_text(recipe, message.get("subject"), message.get("forai"))
        if text is not None:
            texts[message["message_key"]] = text
    return texts


def _reindex(settings: Settings, *args: str) -> None:
    """``sidecar reindex --vectors ARGS`` as a user runs it."""
    cli = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "reindex", "--vectors", *args],
        env={**os.environ, **to_env(settings)}, capture_output=True, text=True, timeout=300,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr


def _recipe_round_trip(settings: Settings, api: object, emails: list[dict[str, Any]]) -> str:
    """Default recipe → forai → default again, with the CLI; returns the rebuilt collection."""
    admin, prefix = ops.Admin(settings, 120), settings.qdrant_collection
    slug = vector_slug(settings)  # the configured encoder's, its precision included (-int8)
    default = f"{prefix}-{slug}-subject-forai"

    def hashes(collection: str) -> dict[str, str]:
        return admin("hashes", collection=collection, mailbox_id=BOX)  # type: ignore[no-any-return]

    subject_forai = {k: text_hash(t) for k, t in _texts(emails, "subject-forai").items()}
    assert admin.state()[:2] == (default, None) and hashes(default) == subject_forai
    before = _keys(api, QUERY)
    assert len(before) == 10
    _reindex(settings, "--recipe", "forai", "--settle-s", "0.5", "--verify-timeout", "120")
    legacy = f"{prefix}-{slug}"  # no recipe suffix: forai, the name before recipes
    assert admin.state()[:2] == (legacy, default)
    assert hashes(legacy) == {k: text_hash(t) for k, t in _texts(emails, "forai").items()}
    assert len(_keys(api, QUERY)) == 10  # searches read the forai vectors
    _reindex(settings, "--finish", "--grace-s", "0.5")
    _reindex(settings, "--settle-s", "0.5", "--verify-timeout", "120")  # to SIDECAR_EMBED_RECIPE
    assert admin.state()[:2] == (default, legacy) and hashes(default) == subject_forai
    assert set(_keys(api, QUERY)) == set(before)  # the same vectors, embedded afresh
    _reindex(settings, "--finish", "--grace-s", "0.5")
    return default


def test_reindex_to_another_model_search_and_roll_back(settings: Settings, tmp_path: Path) -> None:
    emails = corpus(CORPORA / "notmuch-lkml.jsonl.gz")[:40]
    tiny = build_tiny_model(tmp_path / "models", [e["content"]["forAI"] or "" for e in emails])
    settings = settings.model_copy(update={"batch_messages": 16, "embed_models": (str(tiny),)})
    ddb = prepare_tables(settings)
    for email in emails:
        assert store_message(ddb, settings.table, to_items(email, BOX))
    with contextmanager(start_api)(settings, tmp_path, BOX, OTHER) as api:
        index_all(settings, tmp_path)
        admin = ops.Admin(settings, 120)
        assert wait_until(lambda: admin.state()[0] is not None, timeout=120)
        old = _recipe_round_trip(settings, api, emails)
        before = _keys(api, QUERY)
        assert len(before) == 10

        with pytest.raises(ReindexError, match="holds no sentence-transformers model"):
            ops.reindex_vectors(settings, None, model=str(tmp_path), settle_s=0.5)
        unknown = build_tiny_model(tmp_path / "other", ["x"], name="not-in-embed-models")
        with pytest.raises(ReindexError, match="cannot embed with"):
            ops.reindex_vectors(settings, None, model=str(unknown), settle_s=0.5)

        report = ops.reindex_vectors(settings, None, model=str(tiny), settle_s=1.0,
                                     verify_timeout_s=120)
        tiny_name = f"{settings.qdrant_collection}-tiny-bert-e5-subject-forai"
        assert (report.old, report.new) == (old, tiny_name)
        assert admin.state()[:2] == (report.new, old)
        assert {c[1:] for c in report.counts.values()} == {(40, 40)}
        after = _keys(api, QUERY)  # embedded by the tiny model: a 384-d query would be refused
        assert len(after) == 10 and after != before

        assert ops.rollback_vectors(settings) == (old, report.new)
        assert _keys(api, QUERY) == before  # MiniLM's ranking again, query embedded by MiniLM
    store = build_store(settings)  # the API has stopped: this process may open the store
    try:
        def size(name: str) -> int:
            first = next(store.scroll(name, None, None, with_vector=True))[0]
            return len(first.vector or [])

        sizes = {name: size(name) for name in (old, report.new, f"{report.new}-cache")}
        assert sizes == {old: DIMENSION, report.new: TINY_DIM, f"{report.new}-cache": TINY_DIM}
        assert store.count(report.new, None) == store.count(old, None) == 40
        stored = {
            p.payload["message_key"]: p.vector
            for page in store.scroll(old, None, None, with_vector=True)
            for p in page
        }
    finally:
        store.close()
    texts = _texts(emails, "subject-forai")
    keys = sorted(texts)[:5]
    encoder = build_embedder(settings)
    fresh = encoder.embed([texts[k] for k in keys])
    # int8 (the default) scales activations per batch, so a vector moves a little with its
    # batch-mates (bench-encoders' batch stability: min cosine ~0.99); float32's does not
    floor = 0.999 if encoder.precision == "float32" else 0.99
    for key, want in zip(keys, fresh, strict=True):
        got = stored[key] or []
        assert sum(a * b for a, b in zip(got, want, strict=True)) > floor, key  # unit vectors
