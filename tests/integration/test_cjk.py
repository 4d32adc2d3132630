"""Chinese and Japanese mail searchable as words (issue 16): mapping v3 (cjk_width +
cjk_bigram from analysis-common) is the default, and an index of v2 reaches it through
``sidecar reindex`` — run as docs/query-syntax.md documents it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings, to_env
from search_api.query import build_search_body, parse
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import ingest_fulltext, prepare_tables, workers

pytestmark = [pytest.mark.stack, pytest.mark.slow]

SENDER = ("李雷", "li@example.cn")
MAILS = [
    mail(1, "Release planning", "The release checklist is ready.", sender=SENDER, to=["b@x"]),
    mail(
        2,
        "季度预算会议",
        "我们明天讨论季度预算和发布计划，请准备好相关材料。",
        sender=SENDER,
        to=["b@x"],
    ),
    mail(
        3,
        "プロジェクトの予算",
        "来週の会議では新しいプロジェクトの予算について話し合います。",
        sender=SENDER,
        to=["b@x"],
    ),
    mail(4, "東京出張", "東京都の取引先を訪問します。", sender=SENDER, to=["b@x"]),
]
CASES = [
    ("季度预算", {2}),
    ("发布计划", {2}),
    ("subject:预算会议", {2}),
    ("会議", {3}),
    ("プロジェクトの予算", {3}),
    ("予算", {3}),  # Japanese 予 (not the Chinese 预)
    ("京都", {4}),
    ("ＡＢＣ東京", set()),  # full-width Latin folded; no such text
    ("计划预算", set()),  # both words occur, not as this phrase
    ("release 预算", set()),
]


def key(n: int) -> str:
    return hashlib.sha256(f"<msg{n}@example.org>".encode()).hexdigest()


def found(index: OpenSearchIndex, q: str) -> set[str]:
    index.refresh()
    body = build_search_body(parse(q), "box", size=20, sort_by_date=False)
    hits = index.client.search(index=index.alias, body=body, routing="box")["hits"]["hits"]
    return {h["_source"]["message_key"] for h in hits}


def tokens(index: OpenSearchIndex, field: str, text: str) -> list[Any]:
    answer = index.client.indices.analyze(index=index.alias, body={"field": field, "text": text})
    return [t["token"] for t in answer["tokens"]]


def test_v2_index_reindexed_to_v3_finds_chinese_and_japanese_words(
    settings: Settings, tmp_path: Path
) -> None:
    assert MAPPING_VERSION >= 3
    prepare_tables(settings)
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    old = index.ensure(2)  # a deployment indexed before v3
    store_all(settings, "box", MAILS)
    with workers(settings, ("fulltext",)):
        assert ingest_fulltext(settings, tmp_path) == 0
        assert tokens(index, "clean", "季度预算") == ["季", "度", "预", "算"]  # v2: one per char
        cli = subprocess.run(
            [sys.executable, "-m", "indexer.cli.main", "reindex", "--to-version", "3"],
            env={**os.environ, **to_env(settings)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert cli.returncode == 0, cli.stdout + cli.stderr
    assert index.aliases()[index.alias] == [index.index_name(3)] and old != index.index_name(3)
    assert tokens(index, "clean", "季度预算") == ["季度", "度预", "预算"]
    assert tokens(index, "subject.exact", "ﾌﾟﾛｼﾞｪｸﾄ") == tokens(
        index, "subject.exact", "プロジェクト"
    )
    for q, expected in CASES:
        assert found(index, q) == {key(n) for n in expected}, q
