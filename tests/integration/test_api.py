"""Search API against the real stack, on a hand-built mailbox indexed by the pipeline."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.core.documents import point_id
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from sidecar_tools.writer.store import delete_message
from tests.conftest import namespaced
from tests.support.api_fixtures import (
    TOKEN_B,
    Api,
    free_port,
    index_all,
    mail,
    start_api,
    store_all,
)
from tests.support.pipeline_helpers import qdrant_points
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]

ALICE, BOB, CAROL = (
    ("Alice Smith", "alice@example.com"),
    ("Bob Jones", "bob@corp.example"),
    ("Carol White", "carol@example.org"),
)
T1, T2 = "<release-thread@example.org>", "<outage-thread@example.org>"
MAILBOX = [
    mail(
        1,
        "Release 2.4 planning",
        "We need to finalize the release checklist and the changelog.",
        sender=ALICE,
        to=["bob@corp.example"],
        cc=["carol@example.org"],
        thread=T1,
        day=1,
        attachments=1,
    ),
    mail(
        2,
        "Re: Release 2.4 planning",
        "The changelog draft is ready; release notes pending.",
        sender=BOB,
        to=["alice@example.com"],
        thread=T1,
        day=2,
    ),
    mail(
        3,
        "Re: Release 2.4 planning",
        "Shipping on Friday after the checklist review.",
        sender=CAROL,
        to=["bob@corp.example"],
        thread=T1,
        day=3,
    ),
    mail(
        4,
        "Database outage postmortem",
        "The primary database failed over at night; replication lag caused the outage.",
        sender=("Dave Brown", "dave@ops.example"),
        to=["team@example.org"],
        thread=T2,
        day=5,
        attachments=2,
    ),
    mail(
        5,
        "Re: Database outage postmortem",
        "Add alerting on replication lag to prevent another outage.",
        sender=ALICE,
        to=["team@example.org"],
        thread=T2,
        day=6,
    ),
    mail(
        6,
        "Lunch on Friday?",
        "Anyone up for lunch at the café near the office?",
        sender=("Erin Café", "erin@example.net"),
        to=["alice@example.com"],
        day=7,
    ),
    mail(
        7,
        "Invoice 2024-03",
        "Your invoice for March is attached.",
        sender=("Billing", "billing@vendor.example"),
        to=["alice@example.com"],
        day=8,
        attachments=1,
    ),
    mail(
        8,
        "Patch: fix lib/message-file.c leak",
        "This patch fixes a leak in notmuch_message_file_get_header.",
        sender=("Frank", "frank@kernel.example"),
        to=["list@example.org"],
        day=9,
    ),
    mail(
        9,
        "Quarterly budget review",
        "Budget numbers for the quarter look fine; no outage costs.",
        sender=("Grace Hopper", "grace@example.com"),
        to=["finance@example.com"],
        cc=["bob@corp.example"],
        day=10,
    ),
]
SHARED = mail(
    10,
    "Team offsite agenda",
    "Agenda for the offsite: planning and retrospectives.",
    sender=("Hank", "hank@example.com"),
    to=["team@example.org"],
    day=11,
)
BULK = [
    mail(
        1000 + i,
        f"Bulk notice {i}",
        f"bulkword item number {i}",
        sender=("Bot", "bot@example.com"),
        to=["x@example.com"],
        day=1 + i % 28,
    )
    for i in range(510)
]

# A build log longer than the highlighter reads (search_api.query.highlight.HIGHLIGHT_MAX_CHARS).
LONG = mail(
    2000,
    "Nightly build log",
    "Kestrel builder started. " + "compiling module ok. " * 1200 + "zebrafish failed at the end.",
    sender=("CI", "ci@example.com"),
    to=["x@example.com"],
    day=12,
)


def key(n: int) -> str:
    return hashlib.sha256(f"<msg{n}@example.org>".encode()).hexdigest()


def thread_key(thread: str) -> str:
    return hashlib.sha256(thread.encode()).hexdigest()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("api")
    settings = namespaced("api", tmp, unique)
    mailbox_a, mailbox_b = f"alice-{unique}", f"shared #box-{unique}".replace("#", "")
    yield from _running(settings, tmp, mailbox_a, mailbox_b)


def _running(settings: Settings, tmp: Path, mailbox_a: str, mailbox_b: str) -> Iterator[Api]:
    for running in start_api(settings, tmp, mailbox_a, mailbox_b):
        store_all(settings, mailbox_a, [*MAILBOX, SHARED])
        store_all(settings, mailbox_b, [SHARED, *BULK, LONG])
        index_all(settings, tmp)
        yield running


def keys_of(response: Any) -> set[str]:
    assert response.status_code == 200, response.text
    return {h["message_key"] for h in response.json()["hits"]}


OPERATOR_CASES = [
    ("release", {1, 2, 3}),
    ('"release checklist"', {1}),
    ("release checklist", {1, 3}),
    ("outage OR lunch", {4, 5, 6, 9}),
    ("outage -database", {9}),
    ("-release has:attachment", {4, 7}),
    ("(outage OR lunch) has:attachment", {4}),
    ("from:alice@example.com", {1, 5}),
    ("from:alice", {1, 5}),
    ("from:corp.example", {2}),
    ("from:Bob", {2}),
    ("from:Gra*", {9}),
    ("to:alice@example.com", {2, 6, 7}),
    ("cc:carol@example.org", {1}),
    ("cc:bob", {9}),
    ("subject:outage", {4, 5}),
    ('subject:"outage postmortem"', {4, 5}),
    ("subject:Quart*", {9}),
    ("after:2024-03-08", {7, 8, 9, 10}),
    ("before:2024/03/02", {1, 2}),
    ("after:2024-03-05 before:2024-03-06", {4, 5}),
    ("has:attachment", {1, 4, 7}),
    ("relea*", {1, 2, 3}),
    ("notmuch_message_file_get_header", {8}),
    ("cafe", {6}),
    ("café", {6}),
    ("-from:alice -from:bob has:attachment", {4, 7}),
]


@pytest.mark.parametrize(("q", "expected"), OPERATOR_CASES)
def test_operators_return_exactly_the_expected_messages(
    api: Api, q: str, expected: set[int]
) -> None:
    assert keys_of(api.search(q, limit=100)) == {key(n) for n in expected}
    assert api.search(q, token=TOKEN_B, limit=100).status_code == 403  # another mailbox's token


def test_thread_operator_and_collapse(api: Api) -> None:
    assert keys_of(api.search(f"thread:{thread_key(T1)}")) == {key(1), key(2), key(3)}
    hits = api.search("release OR outage", collapse="thread").json()["hits"]
    by_thread = {h["thread_key"]: h["thread_hits"] for h in hits}
    assert by_thread == {thread_key(T1): 3, thread_key(T2): 2, thread_key("<msg9@example.org>"): 1}


def test_hits_are_joined_to_hot_rows_never_bcc(api: Api) -> None:
    body = api.search('"release checklist"')
    hit = body.json()["hits"][0]
    assert hit["message_id"] == "<msg1@example.org>" and hit["subject"] == "Release 2.4 planning"
    assert hit["from"] == {"email": "alice@example.com", "name": "Alice Smith"}
    assert hit["attachment_count"] == 1 and hit["forai"] and hit["ts"] and hit["date"]
    assert "<mark>release checklist</mark>" in " ".join(hit["highlights"]["clean"]).replace(
        "</mark> <mark>", " "
    )
    assert "hidden-bcc" not in body.text and "bcc" not in body.text


def test_a_match_beyond_the_highlighters_reach_is_found_with_the_body_opening(api: Api) -> None:
    """Snippets come from a body's first 20,000 characters: a word only further down still
    finds its message (ranked as ever), whose snippet is then the body's opening, unmarked;
    a word near the top is marked as before. No error either way."""
    assert len(LONG["content"]["clean"]) > 25_000
    far = api.search("zebrafish", token=TOKEN_B, mailbox=api.mailbox_b)
    assert far.status_code == 200, far.text
    [hit] = far.json()["hits"]
    assert hit["message_key"] == key(2000)
    assert hit["highlights"]["clean"][0].startswith("Kestrel builder started")
    assert "<mark>" not in " ".join(hit["highlights"]["clean"])
    near = api.search("kestrel", token=TOKEN_B, mailbox=api.mailbox_b).json()["hits"]
    assert "<mark>Kestrel</mark>" in " ".join(near[0]["highlights"]["clean"])


def test_access_control(api: Api) -> None:
    assert api.search("release", token=None).status_code == 401
    assert api.search("release", token="wrong").status_code == 401
    other = api.search("release", token=TOKEN_B)
    missing = api.search("release", token=TOKEN_B, mailbox="no-such-mailbox")
    assert other.status_code == missing.status_code == 403
    assert other.json() == missing.json()


def test_message_in_two_mailboxes_is_found_once_in_each(api: Api) -> None:
    hits_a = api.search("offsite").json()["hits"]
    hits_b = api.search("offsite", token=TOKEN_B, mailbox=api.mailbox_b).json()["hits"]
    assert [h["message_key"] for h in hits_a] == [key(10)]
    assert [h["message_key"] for h in hits_b] == [key(10)]


def test_semantic_and_hybrid(api: Api) -> None:
    top = api.search("database failover and replication lag", mode="semantic").json()["hits"]
    assert top and top[0]["message_key"] in {key(4), key(5)}
    assert [h["score"] for h in top] == sorted((h["score"] for h in top), reverse=True)
    fused = api.search("outage", mode="hybrid").json()["hits"]
    assert {h["message_key"] for h in fused[:2]} <= {key(4), key(5), key(9)}
    dated = api.search("release after:2024-03-02", mode="semantic").json()["hits"]
    assert dated and all(h["ts"] >= 1709337600 for h in dated)


def test_similar(api: Api) -> None:
    path = f"/v1/mailboxes/{api.mailbox_a}/messages/{key(1)}/similar"
    others = keys_of(api.get(path, limit=20))
    assert others and not others & {key(1), key(2), key(3)}
    response = api.get(path, limit=20, exclude_thread="false")
    with_thread = [h["message_key"] for h in response.json()["hits"]]
    assert key(1) not in with_thread and {key(2), key(3)} <= set(with_thread)
    scores = [h["score"] for h in response.json()["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert api.get(f"/v1/mailboxes/{api.mailbox_a}/messages/{'a' * 64}/similar").status_code == 404
    assert (
        api.get(
            f"/v1/mailboxes/{api.mailbox_a}/messages/{key(1)}/similar", token=TOKEN_B
        ).status_code
        == 403
    )


def test_cursor_pagination_returns_each_hit_once(api: Api) -> None:
    seen: list[str] = []
    cursor = None
    for _ in range(20):
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = api.search("bulkword", token=TOKEN_B, mailbox=api.mailbox_b, **params).json()
        seen += [h["message_key"] for h in page["hits"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 510
    wrong = api.search("release", cursor=cursor or "eyJyIjoieCJ9")
    assert wrong.status_code == 400


HOSTILE = [
    "*:*",
    '{"query":{"match_all":{}}}',
    "mailbox_id:other",
    ") OR (",
    "\u0000",
    "accentué 🎉",
    '"unterminated',
    "from:",
    "thread:zz",
    "a" * 1025,
    "x" * 5000,
    "(((((((((((((((((((((((((((((((((((a",
    "-",
    "OR",
    "subject:" + "é" * 500,
]


@pytest.mark.parametrize("mode", ["fulltext", "semantic", "hybrid"])
def test_hostile_queries_never_500_nor_leak(api: Api, mode: str) -> None:
    own = {key(n) for n in range(1, 11)}
    for q in HOSTILE:
        response = api.search(q, mode=mode)
        assert response.status_code in (200, 400, 413), (q, response.status_code, response.text)
        assert "Traceback" not in response.text
        if response.status_code == 200:
            assert keys_of(response) <= own
        if response.status_code == 400 and q.startswith("("):
            assert "position" in response.json()


def test_hostile_paths(api: Api) -> None:
    for mk in ["../../etc/passwd", "..%2F..%2Fetc", "A" * 64, "0" * 63, key(1) + "0"]:
        response = api.get(f"/v1/mailboxes/{api.mailbox_a}/messages/{mk}/similar")
        assert response.status_code in (404, 400), (mk, response.status_code)
    for mailbox in ["x#y", "..", api.mailbox_b, "%00"]:
        assert api.search("release", mailbox=mailbox).status_code in (403, 404)
    assert api.search("release", limit=1000).status_code == 400


def test_health_ready_openapi(api: Api) -> None:
    assert api.get("/healthz", token=None).json() == {"status": "ok"}
    ready = api.get("/readyz", token=None)
    assert ready.status_code == 200 and ready.json()["ready"]
    spec = api.get("/openapi.json", token=None).json()
    assert "/v1/mailboxes/{mailbox_id}/search" in spec["paths"]
    assert "has:attachment" in spec["info"]["description"]


def _vectors_applied(metrics_url: str) -> float:
    """Messages the API process's vectors consumer has applied (its metrics port)."""
    text = httpx.get(metrics_url, timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "sidecar_worker_messages_total"
        and sample.labels == {"stage": "vectors", "outcome": "applied"}
    )


def test_deleted_message_is_dropped_and_repaired(settings: Settings, tmp_path: Path) -> None:
    """On an API of its own (it stops it to inspect the embedded vector store), so it does not
    depend on running after the module's other tests."""
    settings = settings.model_copy(update={"api_metrics_port": free_port()})
    metrics_url = f"http://127.0.0.1:{settings.api_metrics_port}/metrics"
    mailbox = f"repair-{uuid.uuid4().hex[:8]}"
    with contextmanager(start_api)(settings, tmp_path, mailbox, f"{mailbox}-b") as api:
        store_all(settings, mailbox, [MAILBOX[0], MAILBOX[6]])  # <msg1@…>, <msg7@…>
        index_all(settings, tmp_path)
        applied = _vectors_applied(metrics_url)
        assert keys_of(api.search("invoice")) == {key(7)}
        ddb = aws.client(settings, "dynamodb")
        delete_message(ddb, settings.table, mailbox, "<msg7@example.org>")
        # the join drops it before the indexes catch up
        assert keys_of(api.search("invoice")) == set()
        index = factories.fulltext_index(settings)
        ref = MessageRef(mailbox, key(7))

        def gone_from_opensearch() -> bool:
            return not index.client.exists(
                index=index.alias, id=point_id(ref), routing=ref.mailbox_id
            )

        wait_for(gone_from_opensearch, timeout=60, message="the full-text repair did not delete it")
        # the vectors repair runs in the API process, which owns the store: its count of applied
        # messages says when it is done; then the API may be stopped and the store opened here
        wait_for(lambda: _vectors_applied(metrics_url) > applied, timeout=60,
                 message="the API's vectors consumer applied no repair")
    points = qdrant_points(settings, mailbox)
    assert (mailbox, key(7)) not in points
    assert (mailbox, key(1)) in points
