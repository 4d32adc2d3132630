"""Every OpenSearch call the sidecar makes, SigV4-signed and verified by a proxy that checks
signatures as Amazon OpenSearch Service does (``tests/support/sigv4_proxy.py``): ingest through real
workers, a reindex, every search mode and `similar`, reconcile and purge — no 403. A wrong
secret is refused with a clear 403; the start-up check accepts Serverless (``aoss``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from opensearchpy.exceptions import AuthorizationException

from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.adapters.preflight import config_problem
from indexer.core.errors import ConfigurationError
from indexer.ops import reindex as ops
from indexer.ops.purge import purge
from indexer.ops.reconcile import reconcile
from indexer.settings import Settings
from search_api.app import create_app
from search_api.auth import token_hash
from sidecar_tools.writer.files import load_file
from tests.support.ops_helpers import sample_subset
from tests.support.pipeline_helpers import export_stream, ingest_files, prepare_tables, workers
from tests.support.sigv4_proxy import Expected, SigV4Proxy

pytestmark = pytest.mark.stack

KEY, SECRET = "AKIDSIDECARTEST00001", "sidecar-test-secret-key/with+chars"
BOX, TOKEN = "signed@example.com", "sigv4-token"


@pytest.fixture
def proxy(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[SigV4Proxy]:
    """The proxy in front of the local node; boto3's chain finds the known test credentials
    (in this process and in the workers it spawns)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with SigV4Proxy(settings.opensearch_url, Expected(KEY, SECRET, "eu-west-1")) as running:
        yield running


def _signed(settings: Settings, proxy: SigV4Proxy) -> Settings:
    return settings.model_copy(update={
        "opensearch_url": proxy.url, "opensearch_auth": "sigv4", "aws_region": "eu-west-1",
        "api_tokens": json.dumps({token_hash(TOKEN): [BOX]}), "batch_messages": 8,
    })


def test_every_opensearch_call_is_signed_and_verified(
    settings: Settings, proxy: SigV4Proxy, tmp_path: Path
) -> None:
    signed = _signed(settings, proxy)
    ddb = prepare_tables(signed)
    OpenSearchIndex(build_client(signed), signed.opensearch_index).ensure(1)  # then reindex
    load_file(ddb, signed.table, sample_subset(tmp_path, 12), BOX)
    records = tmp_path / "stream.jsonl"
    export_stream(signed, records)
    with workers(signed):
        summary = ingest_files(signed, [str(records)], timeout=300)
        assert summary.dead_lettered == 0 and summary.applied > 0, summary
        report = ops.reindex(signed, MAPPING_VERSION, settle_s=0.5, verify_timeout_s=120)
        assert report.new.endswith(f"-v{MAPPING_VERSION}") and not report.dead_lettered
    assert proxy.tally.rejected == []

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(signed)) as client:
        keys = []
        for mode in ("fulltext", "semantic", "hybrid"):
            found = client.get(f"/v1/mailboxes/{BOX}/search",
                               params={"q": "release", "mode": mode}, headers=auth)
            assert found.status_code == 200, found.text
            keys += [h["message_key"] for h in found.json()["hits"]]
        assert keys, "no search found anything"
        similar = client.get(f"/v1/mailboxes/{BOX}/messages/{keys[0]}/similar", headers=auth)
        assert similar.status_code == 200, similar.text
        assert client.get("/readyz").json()["failing"] == []

    assert reconcile(signed, mailbox=BOX).drifted == 0
    assert purge(signed, BOX).removed > 0
    assert proxy.tally.rejected == []
    seen = {p.split(" ", 1)[1].rsplit("/", 1)[-1] for p in proxy.tally.paths}
    # Bulk writes, template + aliases, searches, refresh and delete-by-query.
    assert {"_bulk", "_search", "_refresh", "_delete_by_query", "_aliases"} <= seen, seen
    assert any("_index_template" in p for p in proxy.tally.paths)


def test_a_wrong_secret_is_refused_with_a_clear_403(
    settings: Settings, proxy: SigV4Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    signed = _signed(settings, proxy)
    with pytest.raises(ConfigurationError) as raised:  # a 403 is the sidecar refused
        OpenSearchIndex(build_client(signed), signed.opensearch_index).ensure()
    cause = raised.value.__cause__
    assert isinstance(cause, AuthorizationException) and cause.status_code == 403
    assert "signature mismatch" in str(raised.value) and "access policy" in str(raised.value)
    assert proxy.tally.accepted == 0 and proxy.tally.rejected
    with TestClient(create_app(signed)) as client:
        assert "opensearch" in client.get("/readyz").json()["failing"]


def test_unsigned_requests_are_refused(settings: Settings, proxy: SigV4Proxy) -> None:
    """The proxy is not a pass-through: the sidecar without SigV4 gets 403."""
    plain = settings.model_copy(update={"opensearch_url": proxy.url})
    with pytest.raises(AuthorizationException):
        build_client(plain).indices.get_alias(name="x*")
    assert "missing or malformed SigV4" in proxy.tally.rejected[0]


def test_serverless_passes_the_start_up_check(settings: Settings) -> None:
    """Serverless is supported now (tests/integration/test_opensearch_serverless.py): the
    start-up check of every command accepts it and signs for ``aoss``."""
    aoss = settings.model_copy(update={"opensearch_auth": "sigv4", "aws_region": "eu-west-1",
                                       "opensearch_aws_service": "aoss"})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_ACCESS_KEY_ID", KEY)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        assert config_problem(aoss) is None
        assert build_client(aoss).transport.kwargs["http_auth"].service == "aoss"
