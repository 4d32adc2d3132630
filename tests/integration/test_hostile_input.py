"""Hostile input against a running API on the real stack (issue 16): a 400 is never a 5xx.

One API (``sidecar serve``, embedded store owner) + full-text worker over mailbox A (English,
Chinese and Japanese mail) and mailbox B, which shares the index and holds many distinct
words — so prefix expansions are as large as they get on a shared index.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from opensearchpy.exceptions import TransportError

from indexer.adapters.opensearch import client_error, is_transient
from indexer.pipeline import deps
from indexer.settings import Settings
from tests.api_fixtures import Api, index_all, mail, start_api, store_all

pytestmark = [pytest.mark.stack, pytest.mark.slow]

ALICE = ("Alice", "alice@example.com")
CHINESE = "我们明天讨论季度预算和发布计划，请准备好相关材料。"
JAPANESE = "来週の会議では新しいプロジェクトの予算について話し合います。"
MAILBOX_A = [
    mail(1, "Release planning", "The release checklist is ready.", sender=ALICE, to=["b@x.org"]),
    mail(2, "季度预算会议", CHINESE, sender=ALICE, to=["b@x.org"], day=2),
    mail(3, "プロジェクトの予算", JAPANESE, sender=ALICE, to=["b@x.org"], day=3),
]
WORDS = [f"{chr(97 + i % 26)}{chr(97 + (i // 26) % 26)}word{i}" for i in range(600)]
MAILBOX_B = [
    mail(100 + i, f"Notice {i}", " ".join(WORDS[i * 30 : (i + 1) * 30]), sender=ALICE, to=["c@x"])
    for i in range(20)
]
CJK_256 = "".join(chr(0x4E00 + i) for i in range(256))
EMOJI_330 = "".join(chr(0x1F300 + i) for i in range(330))
REPORTED = [
    CJK_256,
    EMOJI_330,
    "subject:" + CJK_256,
    " OR ".join(f'"{chr(97 + i % 26)}"*' for i in range(64)),
    " OR ".join(f'"{w[:2]}"*' for w in WORDS[:64]),
]


def key(n: int) -> str:
    return hashlib.sha256(f"<msg{n}@example.org>".encode()).hexdigest()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("hostile")
    settings = Settings(
        table=f"hostile-{unique}",
        opensearch_index=f"hostile-{unique}",
        qdrant_collection=f"hostile-{unique}",
        qdrant_path=tmp / "qdrant",
        queue_prefix=f"hostile-{unique}",
    )
    for running in start_api(settings, tmp, f"a-{unique}", f"b-{unique}"):
        store_all(settings, running.mailbox_a, MAILBOX_A)
        store_all(settings, running.mailbox_b, MAILBOX_B)
        index_all(settings, tmp)
        yield running


@pytest.mark.parametrize("q", REPORTED)
@pytest.mark.parametrize("mode", ["fulltext", "hybrid"])
def test_reported_queries_answer_400_or_200_never_5xx(api: Api, q: str, mode: str) -> None:
    response = api.search(q, mode=mode)
    assert response.status_code in (200, 400), (q[:40], response.status_code, response.text)
    assert "Retry-After" not in response.headers
    if response.status_code == 400:
        assert "at most" in response.json()["detail"]


def test_long_cjk_query_is_answered_200(api: Api) -> None:
    q = (CHINESE * 12)[:300]
    response = api.search(q)
    assert response.status_code == 200, response.text


QUERY_TEXT = st.one_of(
    st.text(max_size=1024),
    st.lists(
        st.sampled_from(
            ["OR", "AND", "-", "(", ")", '"', "*", "from:", "subject:", "a*", "日本", "🎉", "x"]
        ),
        max_size=200,
    ).map(" ".join),
    st.lists(st.sampled_from(['"a"*', "b*", "from:c*", "to:d*", "subject:e*"]), max_size=64).map(
        " OR ".join
    ),
).filter(lambda q: 0 < len(q) <= 1024)


@hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(q=QUERY_TEXT, mode=st.sampled_from(["fulltext", "fulltext", "hybrid"]))
def test_generated_queries_never_see_a_5xx(api: Api, q: str, mode: str) -> None:
    response = api.search(q, mode=mode)
    assert response.status_code < 500, (q, response.status_code, response.text)


@pytest.mark.parametrize(
    "query",
    [
        {"bool": {"should": [{"term": {"subject": f"w{i}"}} for i in range(1100)]}},
        {"no_such_query": {}},
        {"range": {"ts": {"gte": "not a number"}}},
    ],
)
def test_engine_refusals_are_client_errors_not_outages(api: Api, query: dict[str, Any]) -> None:
    """The real engine's answers to a bad request (a 500 for too many clauses among them)."""
    index = deps.fulltext_index(api.settings)
    with pytest.raises(TransportError) as refused:
        index.client.search(index=index.alias, body={"query": query})
    assert client_error(refused.value), refused.value.info
    assert not is_transient(refused.value)
