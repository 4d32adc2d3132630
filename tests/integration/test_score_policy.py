"""No cross-mailbox signal in what the API returns (issue 16): indexing *another* mailbox
changes no value of this mailbox's responses, nor (mapping v4) the engine's raw scores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.settings import Settings
from search_api.query import build_search_body, parse
from tests.conftest import namespaced
from tests.support.api_fixtures import Api, index_all, mail, start_api, store_all

pytestmark = [pytest.mark.stack, pytest.mark.slow]

SENDER = ("Alice", "alice@example.com")
OURS = [
    mail(
        1, "Budget budget budget", "budget figures budget review budget", sender=SENDER, to=["b@x"]
    ),
    mail(2, "Budget notes", "the budget figures and the review notes", sender=SENDER, to=["b@x"]),
    mail(3, "Team lunch", "lunch on friday near the office", sender=SENDER, to=["b@x"], day=2),
]
THEIRS = [
    mail(100 + n, f"Budget {n}", "budget budget budget budget " * 5, sender=SENDER, to=["c@x"])
    for n in range(40)
]
REQUESTS: list[dict[str, Any]] = [
    {"q": "budget"},
    {"q": "budget", "limit": 1},
    {"q": "budget", "sort": "date"},
    {"q": "budget", "collapse": "thread"},
    {"q": "budget review", "mode": "semantic"},
    {"q": "budget", "mode": "hybrid"},
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, Path]]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("scores")
    settings = namespaced("scores", tmp, unique)
    for running in start_api(settings, tmp, f"ours-{unique}", f"theirs-{unique}"):
        yield running, tmp


def answers(api: Api) -> list[dict[str, Any]]:
    out = []
    for params in REQUESTS:
        response = api.search(**params)
        assert response.status_code == 200, (params, response.text)
        out.append(response.json())
    second = api.search("budget", limit=1, cursor=out[1]["next_cursor"])  # a later page
    out.append(second.json())
    return out


def raw_scores(settings: Settings, mailbox: str) -> list[float]:
    index = factories.fulltext_index(settings)
    index.refresh()
    body = build_search_body(parse("budget"), mailbox, size=10, sort_by_date=False)
    hits = index.client.search(index=index.alias, body=body, routing=mailbox)["hits"]["hits"]
    return [float(h["_score"]) for h in hits]


def test_indexing_another_mailbox_changes_nothing_in_this_mailboxs_answers(
    api: tuple[Api, Path],
) -> None:
    running, tmp = api
    store_all(running.settings, running.mailbox_a, OURS)
    index_all(running.settings, tmp)
    # raw_scores refreshes first: an indexed message is searchable after the next refresh
    engine_before = raw_scores(running.settings, running.mailbox_a)
    before = answers(running)
    assert [h["score"] for h in before[0]["hits"]] == [1.0, 0.5]  # rank-derived
    assert [h["score"] for h in before[-1]["hits"]] == [0.5]  # rank 1 on the second page

    store_all(running.settings, running.mailbox_b, THEIRS)
    index_all(running.settings, tmp)
    engine_after = raw_scores(running.settings, running.mailbox_a)
    after = answers(running)
    # Mapping v4 scores from the document alone (issue 23): even the engine's raw scores stay.
    assert engine_after == engine_before
    assert after == before
