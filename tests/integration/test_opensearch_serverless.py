"""The sidecar on OpenSearch Serverless (``SIDECAR_OPENSEARCH_AWS_SERVICE=aoss``), through a
proxy that verifies SigV4 for service ``aoss`` (credential scope ``.../aoss/aws4_request``) and
answers as a collection does for what collections lack, in front of the real local node:

- ``_refresh``, ``_delete_by_query``, scroll, ``_reindex``, ``_tasks`` and ``GET /``: 404 with
  an empty body — what collections answer to an unsupported operation (opensearch-py #646,
  k-NN #1037: ``NotFoundError(404, '')``, ``server: aoss-amazon``);
- a template or index body with ``number_of_shards``, ``number_of_replicas`` or
  ``refresh_interval``: 400 with an ``illegal_argument_exception`` JSON body (the exact words
  are assumed, not copied from a collection).

Through it: the template and index are created, messages are indexed by the full-text task's
own code, a ``refresh`` (marker wait) makes them searchable, reconcile sees no full-text drift,
and purge (search + bulk delete) leaves none of the mailbox while another one stays whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from opensearchpy.exceptions import NotFoundError, RequestError

from indexer.adapters import factories
from indexer.adapters.opensearch.family import MAPPING_VERSION, mapping_file
from indexer.core.plan import MessageRef
from indexer.ops.purge import purge
from indexer.ops.reconcile import reconcile
from indexer.pipeline.sync import sync_fulltext
from indexer.settings import Settings
from sidecar_tools.writer.files import load_file
from tests.support.ops_helpers import sample_subset
from tests.support.pipeline_helpers import prepare_tables, table_messages
from tests.support.sigv4_proxy import Expected, SigV4Proxy

pytestmark = pytest.mark.stack

KEY, SECRET = "AKIDSIDECARAOSS00001", "sidecar-aoss-secret/key+chars"
REFUSED_SETTINGS = {"number_of_shards", "number_of_replicas", "refresh_interval"}
UNSUPPORTED = ("_refresh", "_delete_by_query", "scroll", "_reindex", "_tasks",
               "_update_by_query")


def _refused_settings(body: Any) -> list[str]:
    """The refused settings a template or create-index body names (any spelling)."""
    if not isinstance(body, dict):
        return []
    settings = (body.get("template") or {}).get("settings") or body.get("settings") or {}
    names = [n.removeprefix("index.") for n in settings]
    names += list(settings.get("index", {})) if isinstance(settings.get("index"), dict) else []
    return sorted(REFUSED_SETTINGS.intersection(names))


def aoss_answer(method: str, target: str, body: bytes) -> tuple[int, bytes] | None:
    """What a collection answers instead of the node (``None``: forward)."""
    parts = urlsplit(target)
    segments = [s for s in parts.path.split("/") if s]
    if not segments or any(s in UNSUPPORTED for s in segments) or "scroll=" in parts.query:
        return 404, b""
    if method == "PUT" and body and (len(segments) == 1 or segments[0] == "_index_template"):
        refused = _refused_settings(json.loads(body))
        if refused:
            reason = f"unsupported index settings {refused}: managed by OpenSearch Serverless"
            error = {"type": "illegal_argument_exception", "reason": reason}
            return 400, json.dumps({"error": {"root_cause": [error], **error},
                                    "status": 400}).encode()
    return None


@pytest.fixture
def proxy(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[SigV4Proxy]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    expected = Expected(KEY, SECRET, "eu-west-1", service="aoss")
    with SigV4Proxy(settings.opensearch_url, expected, gate=aoss_answer) as running:
        yield running


def _serverless(settings: Settings, proxy: SigV4Proxy) -> Settings:
    return settings.model_copy(update={
        "opensearch_url": proxy.url, "opensearch_auth": "sigv4",
        "opensearch_aws_service": "aoss", "aws_region": "eu-west-1",
        "opensearch_visible_timeout_s": 20.0,
    })


def _index_by_fulltext_task(settings: Settings, ddb: Any, mailbox: str) -> int:
    """What a full-text worker does for these messages (its task's body, in process)."""
    refs = [MessageRef(mailbox, key) for key in table_messages(ddb, settings.table, mailbox)]
    outcome = sync_fulltext(factories.store(settings), factories.fulltext_index(settings), refs)
    assert not outcome.poison and len(outcome.applied) == len(refs), outcome
    return len(refs)


def _count(settings: Settings, mailbox: str) -> int:
    body = {"size": 100, "query": {"term": {"mailbox_id": mailbox}}}
    return len(factories.fulltext_index(settings).search(mailbox, body))


def test_the_proxy_answers_as_a_collection(settings: Settings, proxy: SigV4Proxy) -> None:
    """The rules the sidecar is tested against really refuse (so avoiding them is proven)."""
    client = factories.fulltext_index(_serverless(settings, proxy)).client
    with pytest.raises(NotFoundError):
        client.indices.refresh(index="anything")
    with pytest.raises(NotFoundError):
        client.delete_by_query(index="anything", body={"query": {"match_all": {}}})
    template = {"index_patterns": [f"{settings.opensearch_index}-x"],
                "template": mapping_file(MAPPING_VERSION)["template"]}
    with pytest.raises(RequestError) as refused:
        client.indices.put_index_template(name=f"{settings.opensearch_index}-x", body=template)
    assert refused.value.status_code == 400 and "number_of_shards" in str(refused.value.info)
    assert proxy.tally.rejected == [] and len(proxy.tally.gated) == 3


def test_index_search_reconcile_and_purge_on_serverless(
    settings: Settings, proxy: SigV4Proxy, tmp_path: Path, unique: str
) -> None:
    aoss = _serverless(settings, proxy)
    box, other = f"aoss-{unique}@x.org", f"kept-{unique}@x.org"
    index = factories.fulltext_index(aoss)
    assert index.serverless
    index.ensure()  # template without the refused settings, index, alias
    ddb = prepare_tables(aoss)
    load_file(ddb, aoss.table, sample_subset(tmp_path, 10), box)
    load_file(ddb, aoss.table, sample_subset(tmp_path, 3), other)
    assert _index_by_fulltext_task(aoss, ddb, box) == 10
    assert _index_by_fulltext_task(aoss, ddb, other) == 3

    index.refresh()  # no _refresh: waits until a marker is searchable
    assert _count(aoss, box) == 10 and _count(aoss, other) == 3
    assert index.mailbox_counts() == {box: 10, other: 3}  # the marker is no mailbox
    index.ping()  # readiness without GET /

    report = reconcile(aoss, mailbox=box)  # refresh + search_after scan instead of scroll
    assert [d for d in report.remaining if d.index == "fulltext"] == []

    assert purge(aoss, box).fulltext_docs == 10  # search + bulk delete
    index.refresh()
    assert _count(aoss, box) == 0 and _count(aoss, other) == 3
    assert purge(aoss, box).fulltext_docs == 0  # idempotent

    assert proxy.tally.rejected == [], proxy.tally.rejected  # every call signed for aoss
    assert proxy.tally.gated == [], proxy.tally.gated  # nothing a collection lacks was called
    seen = {p.rsplit("/", 1)[-1] for p in proxy.tally.paths}
    assert {"_bulk", "_search", "_aliases"} <= seen, seen
