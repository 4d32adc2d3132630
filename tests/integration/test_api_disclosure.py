"""What the API shows when something is wrong behind it (issue 38): ``/readyz`` on the public
port names components and fixed codes, never the engine's own refusal (an account, a role, an
ARN) nor a table's name; a thread summary the writer stored badly is a null count, not a 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexer.adapters.aws import clients as aws
from indexer.settings import Settings
from search_api.app import create_app
from search_api.auth import token_hash
from search_api.routes import READY_CODES
from tests.support.api_fixtures import mail
from tests.support.pipeline_helpers import prepare_tables
from tests.support.tenant_load import load_mailbox

pytestmark = pytest.mark.stack

ACCOUNT = "123456789012"
REFUSAL = (f"User: arn:aws:sts::{ACCOUNT}:assumed-role/SearchApiRole/i-0abc1234def567890 is "
           f"not authorized to perform: es:ESHttpGet on resource: "
           f"arn:aws:es:eu-west-1:{ACCOUNT}:domain/mail-prod")
TOKEN, BOX = "disclosure-token", "disclosure@example.com"


@pytest.fixture
def refusing_engine() -> Iterator[str]:
    """An endpoint that answers every request as Amazon OpenSearch Service refuses a role."""

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"Message": REFUSAL}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_readyz_with_a_refusing_engine_discloses_nothing(
    settings: Settings, refusing_engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    refused = settings.model_copy(update={"opensearch_url": refusing_engine})
    with TestClient(create_app(refused, vectors=False)) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert set(body["failing"]) == {"opensearch", "dynamodb"}  # no table made: missing
    assert body["errors"] == {"opensearch": READY_CODES["credentials_refused"],
                              "dynamodb": READY_CODES["missing_table"]}
    for secret in (ACCOUNT, "arn:", "assumed-role", "SearchApiRole", "mail-prod",
                   settings.table, "i-0abc"):
        assert secret not in ready.text, secret
    # ... the detail is the operator's, in the log
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "SearchApiRole" in logged and settings.table in logged


def test_a_malformed_thread_count_is_shown_as_null(settings: Settings) -> None:
    served = settings.model_copy(update={"api_tokens": json.dumps({token_hash(TOKEN): [BOX]})})
    prepare_tables(served)
    sender = ("Ann", "ann@example.com")
    load_mailbox(served, BOX, [mail(1, "budget one", "the budget", sender=sender, to=["b@x.y"]),
                               mail(2, "budget two", "a budget", sender=sender, to=["b@x.y"])])
    ddb = aws.client(served, "dynamodb")
    threads = [i for i in ddb.scan(TableName=served.table)["Items"] if i["SK"]["S"] == "THREAD"]
    assert len(threads) == 2
    ddb.update_item(TableName=served.table, Key={"PK": threads[0]["PK"], "SK": {"S": "THREAD"}},
                    UpdateExpression="SET message_count = :v",
                    ExpressionAttributeValues={":v": {"S": "many"}})
    with TestClient(create_app(served, vectors=False)) as client:
        page = client.get(f"/v1/mailboxes/{BOX}/search", params={"q": "budget"},
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert page.status_code == 200, page.text
    sizes = sorted((h.get("thread_messages") for h in page.json()["hits"]), key=str)
    assert sizes == [1, None], page.json()


def test_readyz_warns_when_the_live_index_is_older_than_the_code(settings: Settings) -> None:
    from indexer.adapters.opensearch.family import MAPPING_VERSION
    from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
    from search_api.mapping_check import MAPPING_CODES

    older = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    older.ensure(MAPPING_VERSION - 1)  # before anything makes one of the current version
    prepare_tables(settings)
    with TestClient(create_app(settings, vectors=False)) as client:
        body = client.get("/readyz").json()
    assert body["warnings"] == {"mapping": MAPPING_CODES["behind"]}, body
    assert "fulltext" in body["serving"]  # a warning, never a failure
    assert settings.opensearch_index not in json.dumps(body)


def test_an_older_index_refuses_what_it_would_expand_from_every_mailbox(
    settings: Settings,
) -> None:
    from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
    from search_api.query import parse
    from search_api.query.clauses import PREFIX_FIELDS_VERSION, expands_a_phrase_prefix

    assert expands_a_phrase_prefix(parse('budget "release no"*'))
    assert expands_a_phrase_prefix(parse('-from:"Ann Le"*'))
    assert not expands_a_phrase_prefix(parse('"release"* "release notes" from:ann*'))
    served = settings.model_copy(update={"api_tokens": json.dumps({token_hash(TOKEN): [BOX]})})
    OpenSearchIndex(build_client(served), served.opensearch_index).ensure(
        PREFIX_FIELDS_VERSION - 1)
    prepare_tables(served)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(served, vectors=False)) as client:
        def ask(q: str) -> Any:
            return client.get(f"/v1/mailboxes/{BOX}/search", params={"q": q}, headers=auth)

        refused = ask('"release no"*')
        assert refused.status_code == 400 and "sidecar reindex" in refused.text, refused.text
        assert ask('"release"*').status_code == 200  # one word: a plain prefix, safe anywhere
        assert ask('"release notes"').status_code == 200
