"""Every search mode runs on exactly one OpenSearch shard of an index of four primaries.

Searches are routed by mailbox, so however many primaries the index has, one search should
cost one shard (the capacity model in docs/operations/capacity.md counts on it). The API
talks to the real node through :class:`~sidecar_tools.bench.shard_probe.ShardProbe`, which
records ``_shards.total`` of every ``_search``/``_msearch`` answer; the same probe shows that
an unrouted search of the same index runs on all four (so the assertion can fail).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import pytest

from indexer.adapters import factories
from indexer.adapters.opensearch.index import build_client
from sidecar_tools.bench.shard_probe import ShardProbe
from tests.conftest import namespaced
from tests.support.api_fixtures import TOKEN_A, TOKEN_B, Api, index_all, mail, start_api, store_all

pytestmark = [pytest.mark.stack, pytest.mark.slow]

SHARDS = 4
PEOPLE = [("Ann Lee", "ann@example.com"), ("Ben Ode", "ben@example.org")]
SUBJECTS = ["Release planning for the kernel", "Database outage postmortem",
            "Invoice for March attached", "Build failure on mips", "Lunch on Friday"]


def _mails(offset: int) -> list[dict[str, object]]:
    return [
        mail(offset + n, SUBJECTS[n % len(SUBJECTS)],
             f"{SUBJECTS[n % len(SUBJECTS)]}: details number {n}, the release and the build.",
             sender=PEOPLE[n % 2], to=["team@example.org"], day=1 + n)
        for n in range(8)
    ]


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, ShardProbe]]:
    """An API whose OpenSearch is the probe in front of the stack's node; the index of four
    primaries holds two searched mailboxes and six others (so the shards hold mailboxes)."""
    from indexer.settings import Settings as Base

    probe = ShardProbe(Base().opensearch_url)
    tmp = tmp_path_factory.mktemp("fanout")
    unique = uuid.uuid4().hex[:8]
    settings = namespaced("fanout", tmp, unique, opensearch_url=probe.url,
                          opensearch_shards=SHARDS)
    a, b = f"fan-a-{unique}", f"fan-b-{unique}"
    try:
        for api in start_api(settings, tmp, a, b):
            store_all(settings, a, _mails(0))
            store_all(settings, b, _mails(100))
            for n in range(6):
                store_all(settings, f"fan-other{n}-{unique}", _mails(200 + 10 * n))
            index_all(settings, tmp)
            yield api, probe
    finally:
        build_client(settings).indices.delete(index=f"{settings.opensearch_index}*",
                                              ignore_unavailable=True, expand_wildcards="all")
        probe.close()


def _key(n: int) -> str:
    return hashlib.sha256(f"<msg{n}@example.org>".encode()).hexdigest()


def test_the_index_has_four_primaries_and_an_unrouted_search_runs_on_all(
    probed: tuple[Api, ShardProbe],
) -> None:
    api, probe = probed
    index = factories.fulltext_index(api.settings)
    found = index.client.indices.get_settings(index=index.alias, name="index.number_of_shards")
    assert {int(s["settings"]["index"]["number_of_shards"]) for s in found.values()} == {SHARDS}
    probe.take()
    index.client.search(index=index.alias, body={"query": {"match_all": {}}})
    seen = probe.take()
    assert [s.shards for s in seen] == [SHARDS], seen


@pytest.mark.parametrize("mode", ["fulltext", "semantic", "hybrid", "similar"])
def test_every_search_mode_runs_on_one_shard(probed: tuple[Api, ShardProbe], mode: str) -> None:
    api, probe = probed
    probe.take()
    for mailbox, token, first in ((api.mailbox_a, TOKEN_A, 0), (api.mailbox_b, TOKEN_B, 100)):
        if mode == "similar":
            response = api.get(f"/v1/mailboxes/{mailbox}/messages/{_key(first)}/similar", token)
        else:
            response = api.search("release build", token, mailbox, mode=mode)
        assert response.status_code == 200, response.text
        assert response.json()["hits"], (mode, mailbox, response.text)
    seen = probe.take()
    if mode != "semantic":  # semantic asks Qdrant only (checked below: no unrouted search)
        assert seen, f"{mode}: no OpenSearch search recorded"
    assert all(s.shards == 1 for s in seen), seen
    assert all(s.routing in (api.mailbox_a, api.mailbox_b) for s in seen), seen

