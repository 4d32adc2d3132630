"""Hostile input against a running API on the real stack (issue 16): a 400 is never a 5xx.

One API (``sidecar serve``, embedded store owner) + full-text worker over mailbox A (English,
Chinese and Japanese mail) and mailbox B, which shares the index and holds many distinct
words — so prefix expansions are as large as they get on a shared index.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from opensearchpy.exceptions import TransportError

from indexer.adapters import factories
from indexer.adapters.opensearch.errors import client_error, is_transient
from tests.conftest import namespaced
from tests.support.api_fixtures import TOKEN_B, Api, index_all, mail, start_api, store_all

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
    settings = namespaced("hostile", tmp, unique)
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
    index = factories.fulltext_index(api.settings)
    with pytest.raises(TransportError) as refused:
        index.client.search(index=index.alias, body={"query": query})
    assert client_error(refused.value), refused.value.info
    assert not is_transient(refused.value)


def unsigned(payload: Any) -> str:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


FORGED = [{"a": 5}, {"a": ["x", "y", "z"]}, {"a": {"x": 1}}, {"a": [None, None, None]}]
FORGED += [{"o": "abc"}, {"o": []}, {"o": 1e300}]


@pytest.mark.parametrize("mode", ["fulltext", "semantic"])
def test_reported_forged_cursors_are_400(api: Api, mode: str) -> None:
    for position in FORGED:
        for cursor in (unsigned(position), unsigned(position) + ".AAAA"):
            response = api.search("notice", token=TOKEN_B, mailbox=api.mailbox_b, cursor=cursor)
            assert response.status_code == 400, (position, response.text)
    nan = unsigned(b'{"a":[NaN,1,"x"]}') + "." + unsigned(b"x" * 32)
    assert api.search("notice", mode=mode, cursor=nan).status_code == 400


def test_issued_cursors_page_through_once(api: Api) -> None:
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    for _ in range(10):
        page = api.search("notice", token=TOKEN_B, mailbox=api.mailbox_b, **params).json()
        seen += [h["message_key"] for h in page["hits"]]
        if not page["next_cursor"]:
            break
        params["cursor"] = page["next_cursor"]
    assert len(seen) == len(set(seen)) == 20
    other = api.search("notice OR x", token=TOKEN_B, mailbox=api.mailbox_b, **params)
    assert other.status_code == 400  # a cursor of another search


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)
CURSORS = st.one_of(
    JSON.map(lambda v: unsigned(json.dumps(v).encode())),
    JSON.map(lambda v: unsigned({"r": "x", "a": v})),
    st.binary(max_size=200).map(unsigned),
    st.tuples(st.binary(max_size=100), st.binary(max_size=40)).map(
        lambda p: unsigned(p[0]) + "." + unsigned(p[1])
    ),
    st.text(max_size=300),
).filter(bool)


@hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(cursor=CURSORS, mode=st.sampled_from(["fulltext", "semantic", "hybrid"]))
def test_generated_cursors_never_see_a_5xx(api: Api, cursor: str, mode: str) -> None:
    response = api.search("release", mode=mode, cursor=cursor)
    assert response.status_code == 400, (cursor, response.status_code, response.text)
