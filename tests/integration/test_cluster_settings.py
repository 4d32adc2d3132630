"""The distribution settings reach the engines (issue 26 part 1), on the shared single node:
an index family created with 2 shards has 2, a changed replica count is applied to the
existing index by ``ensure``, and a bulk write that asks for every copy (``all``) succeeds
where every copy is active. The node-loss tests on a cluster are not written yet."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.core.plan import MessageRef
from indexer.settings import Settings


@pytest.fixture
def alias() -> Iterator[str]:
    name = f"cluster-{uuid.uuid4().hex[:10]}"
    yield name
    client = build_client(Settings())
    client.indices.delete(index=f"{name}-v*", ignore=[404])
    client.indices.delete_index_template(name=f"{name}-messages-v*", ignore=[404])


def _index_settings(index: OpenSearchIndex) -> dict[str, str]:
    found = index.client.indices.get_settings(index=index.alias)
    ((_, body),) = found.items()
    return dict(body["settings"]["index"])


def test_new_indices_take_the_configured_shards_and_writes_wait_for_all(alias: str) -> None:
    settings = Settings(opensearch_index=alias, opensearch_shards=2, opensearch_replicas=0,
                        opensearch_wait_for_active_shards="all")
    index = OpenSearchIndex(build_client(settings), alias)
    index.ensure()
    assert _index_settings(index)["number_of_shards"] == "2"
    assert _index_settings(index)["number_of_replicas"] == "0"
    ref = MessageRef("box@example.com", "k1")
    assert index.apply({ref: {"mailbox_id": ref.mailbox_id, "message_key": "k1"}}) == {}
    index.refresh()
    assert index.mailbox_counts() == {"box@example.com": 1}


def test_ensure_aligns_the_replica_count_of_an_existing_index(alias: str) -> None:
    OpenSearchIndex(build_client(Settings(opensearch_replicas=0)), alias).ensure()
    raised = OpenSearchIndex(build_client(Settings(opensearch_replicas=1)), alias)
    raised.ensure()  # one node: the replica stays unassigned, but the setting is applied
    assert _index_settings(raised)["number_of_replicas"] == "1"
    back = OpenSearchIndex(build_client(Settings(opensearch_replicas=0)), alias)
    back.ensure()
    assert _index_settings(back)["number_of_replicas"] == "0"


def test_the_refresh_interval_is_set_on_new_and_existing_indices(alias: str) -> None:
    index = OpenSearchIndex(build_client(Settings()), alias)
    index.ensure()
    assert _index_settings(index)["refresh_interval"] == "500ms"  # the default
    OpenSearchIndex(build_client(Settings(opensearch_refresh_interval="1s")), alias).ensure()
    assert _index_settings(index)["refresh_interval"] == "1s"  # applied live, no reindex


def test_a_refresh_interval_must_be_a_positive_time() -> None:
    from pydantic import ValidationError

    for bad in ("-1", "0s", "1", "1h", "fast"):
        with pytest.raises(ValidationError):
            Settings(opensearch_refresh_interval=bad)


def test_a_comma_list_of_hosts_is_one_client_over_each() -> None:
    url = Settings().opensearch_url.rstrip("/")  # the stack the suite runs against
    settings = Settings(opensearch_url=f"{url}, {url}/")
    client = build_client(settings)
    assert len(client.transport.connection_pool.connections) == 2
    assert client.info()["version"]["number"]


@pytest.mark.qdrant_server
def test_qdrant_write_and_read_consistency_reach_the_server(qdrant_server: object) -> None:
    """The write consistency factor is the created collection's; a search asking a majority of
    replicas answers (on one node every replica is there)."""
    from indexer.adapters.qdrant.index import VectorIndex, build_store
    from indexer.core.vectors import match

    server = qdrant_server
    settings = Settings(qdrant_url=server.url, qdrant_api_key=server.api_key,  # type: ignore[attr-defined]
                        qdrant_write_consistency_factor=2, qdrant_read_consistency="majority")
    store = build_store(settings)
    index = VectorIndex(store, f"c-{uuid.uuid4().hex[:6]}", "m", 4)
    index.ensure()
    client = store.client  # type: ignore[attr-defined]
    assert client.get_collection(index.collection).config.params.write_consistency_factor == 2
    ref = MessageRef("box@example.com", "k1")
    index.upsert([(ref, [1.0, 0.0, 0.0, 0.0], {"mailbox_id": ref.mailbox_id})])
    hits = index.query([1.0, 0.0, 0.0, 0.0], match("mailbox_id", ref.mailbox_id), 5)
    assert [h.payload["mailbox_id"] for h in hits] == ["box@example.com"]
    for name in (index.collection, index.cache):
        store.drop(name)
    store.close()
