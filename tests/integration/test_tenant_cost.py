"""One tenant can never slow another (issue 23, part 1), on 4,000 real messages.

A hostile caller's worst shapes (64 one-letter address or word prefixes: 5–14 s each before,
almost all of it in the highlighter) each answer within a second or get a 400 naming the
limit; while four of them run at once, another tenant's simple search keeps its p99 within
2× of its quiet p99, both measured in this run (300 searches each).
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import CORPORA, namespaced
from tests.support.api_fixtures import TOKEN_A, TOKEN_B, Api, start_api
from tests.support.mail_helpers import corpus
from tests.support.tenant_load import load_mailbox
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.stack, pytest.mark.slow]

LETTERS = [chr(97 + i % 26) for i in range(64)]
HOSTILE = {
    "to-one-letter": " OR ".join(f"to:{c}*" for c in LETTERS),
    "from-one-letter": " OR ".join(f"from:{c}*" for c in LETTERS),
    "cc-two-letters": " OR ".join(f"cc:{c}{d}*" for c, d in zip(LETTERS, LETTERS[7:], strict=False)),
    "word-one-letter": " OR ".join(f"{c}*" for c in LETTERS),
    "phrase-prefix": " OR ".join(f'"{c}"*' for c in LETTERS),
    "subject-prefix": " OR ".join(f"subject:{c}{d}*" for c, d in zip(LETTERS, LETTERS[3:], strict=False)),
    "to-three-letters": " OR ".join(f"to:{c}{d}{e}*" for c, d, e in zip(
        LETTERS, LETTERS[1:], LETTERS[2:], strict=False)),
    "many-words": " OR ".join(f"w{i}ord" for i in range(64)),
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("tenant-cost")
    settings = namespaced("cost", tmp, unique)
    for running in start_api(settings, tmp, f"a-{unique}", f"b-{unique}"):
        big = corpus(CORPORA / "linux-mips-4k.jsonl.gz")
        assert load_mailbox(settings, running.mailbox_a, big) == 4000
        load_mailbox(settings, running.mailbox_b, corpus(CORPORA / "notmuch-lkml.jsonl.gz"))
        yield running


def timed(api: Api, q: str, token: str = TOKEN_A, **params: object) -> tuple[float, httpx.Response]:
    mailbox = api.mailbox_a if token == TOKEN_A else api.mailbox_b
    start = time.perf_counter()
    response = api.search(q, token=token, mailbox=mailbox, **params)
    return time.perf_counter() - start, response


def polite(api: Api, q: str, **params: object) -> tuple[float, httpx.Response]:
    """``timed``, once more after ``Retry-After`` if this caller's rate of expensive
    searches was spent (a 429), as an HTTP client's retry policy does."""
    took, response = timed(api, q, **params)
    if response.status_code == 429:
        time.sleep(float(response.headers["Retry-After"]))  # honouring it is the test (not a wait)
        took, response = timed(api, q, **params)
    return took, response


@pytest.mark.parametrize("mode", ["fulltext", "hybrid"])
@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_each_hostile_shape_answers_within_a_second_or_is_refused(
    api: Api, shape: str, mode: str
) -> None:
    timed(api, "release", mode=mode)  # warm: the query encoder is loaded by then
    took, response = polite(api, HOSTILE[shape], mode=mode)
    if response.status_code == 400:
        assert "at most" in response.json()["detail"] or "budget" in response.json()["detail"]
        assert took < 1.0, f"{shape}: a 400 after {took:.2f} s"
    else:
        assert response.status_code == 200, response.text
        assert took < 1.0, f"{shape} ({mode}): {took:.2f} s"


def test_a_real_prefix_search_still_answers_with_snippets(api: Api) -> None:
    response = api.search("to:linux-mips* cache", limit=20)
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert hits and all("<mark>" in str(h["highlights"]) for h in hits[:5])


def test_hybrid_marks_its_page_only(api: Api) -> None:
    response = api.search("cache flush", mode="hybrid", limit=5)
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert len(hits) == 5 and any("<mark>" in str(h.get("highlights")) for h in hits)


# Each window's size. A p99 of 120 searches is their second slowest: one pause of the
# 2-core machine's JVM or scheduler in the loaded window failed the fresh-clone run at 2.73x
# (157 against 58 ms) while the same test measures 1.03-1.17x here; of 300 it is the third
# slowest, so it takes several slow searches, what a tenant starved by another would see.
SAMPLES = 300


def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


def test_another_tenants_p99_holds_while_four_hostile_searches_run(api: Api) -> None:
    """Quiet p99 and loaded p99 of tenant B's ``release`` (limit 5), measured in this run
    while tenant A keeps 4 of its costliest admitted shapes in flight. A's client honours
    ``Retry-After`` on a 429 (as HTTP clients' retry policies do): the per-caller cap on
    expensive searches is what keeps A to its share, the clause bound what keeps each cheap."""
    simple = {"q": "release", "limit": 5}
    admitted = [q for q in HOSTILE.values() if polite(api, q)[1].status_code == 200]
    assert admitted, "no hostile shape is admitted: nothing to load the engine with"
    for _ in range(5):
        timed(api, token=TOKEN_B, **simple)  # type: ignore[arg-type]
    quiet = [timed(api, token=TOKEN_B, **simple)[0] for _ in range(SAMPLES)]  # type: ignore[arg-type]
    stop = threading.Event()
    statuses: list[int] = []

    def hostile(q: str) -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                r = client.get(f"{api.url}/v1/mailboxes/{api.mailbox_a}/search",
                               params={"q": q}, headers={"Authorization": f"Bearer {TOKEN_A}"})
                statuses.append(r.status_code)
                if r.status_code == 429:
                    stop.wait(float(r.headers["Retry-After"]))

    threads = [threading.Thread(target=hostile, args=(admitted[i % len(admitted)],))
               for i in range(4)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(statuses) >= len(threads), timeout=60,
                 message=lambda: f"the hostile load has not started: {statuses}")
        # SAMPLES of tenant B's searches, and more while the gate has let fewer than 11
        # hostile ones run (at 2 a second, the window must be long enough for the load to be real)
        loaded: list[float] = []
        until = time.monotonic() + 60
        while len(loaded) < SAMPLES or (
                statuses.count(200) + statuses.count(400) <= 10 and time.monotonic() < until):
            loaded.append(timed(api, token=TOKEN_B, **simple)[0])  # type: ignore[arg-type]
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    quiet_p99, loaded_p99 = _p99(quiet), _p99(loaded)
    print(f"\ntenant B p99: quiet {quiet_p99 * 1000:.1f} ms, under 4 hostile "
          f"{loaded_p99 * 1000:.1f} ms ({loaded_p99 / quiet_p99:.2f}x); hostile statuses "
          f"{ {s: statuses.count(s) for s in set(statuses)} }")
    assert 500 not in statuses and 503 not in statuses
    # the load was real: searches the engine ran (a 400 here is one stopped at its budget,
    # after running for all of it); the gate refuses the rest with 429
    assert statuses.count(200) + statuses.count(400) > 10, statuses
    assert loaded_p99 <= 2 * quiet_p99, (quiet_p99, loaded_p99)
