"""The OpenAPI document is the API's contract (issue 27 part 1): typed answers, the bearer
scheme, every status the API answers (and not FastAPI's 422, which it never does), stable
operationIds; and the one handler that turns the core's transient failures into a 503."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from indexer.core.errors import ConfigurationError, PoisonError, TransientError
from indexer.metrics import MALFORMED_FIELDS
from indexer.settings import Settings
from search_api import hits
from search_api.app import create_app
from search_api.candidates import Candidate
from search_api.cursor import CursorError
from search_api.engine_errors import BackendUnavailable, naming
from search_api.models import Hit
from search_api.query import QueryError
from search_api.service import NotFound

SEARCH = "/v1/mailboxes/{mailbox_id}/search"
SIMILAR = "/v1/mailboxes/{mailbox_id}/messages/{message_key}/similar"
CONTACTS = "/v1/mailboxes/{mailbox_id}/contacts"
OPERATIONS = {  # renaming one renames a generated client's method: a breaking change
    ("/healthz", "get"): "healthz",
    ("/readyz", "get"): "readyz",
    (SEARCH, "get"): "searchMailbox",
    (SIMILAR, "get"): "similarMessages",
    (CONTACTS, "get"): "mailboxContacts",
}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app(Settings(), vectors=False)


@pytest.fixture(scope="module")
def spec(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


def operations(spec: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def resolved(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    found: dict[str, Any] = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return found


def test_every_operation_id_is_stable_and_tagged(spec: dict[str, Any]) -> None:
    ids = {(path, method): op["operationId"] for path, method, op in operations(spec)}
    assert ids == OPERATIONS
    assert all(op["tags"] for _, _, op in operations(spec))
    assert spec["info"]["version"] == version("mail-search-sidecar")


def test_mailbox_routes_use_the_bearer_scheme(spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearer"]["description"],
    }
    for path in (SEARCH, SIMILAR, CONTACTS):
        assert spec["paths"][path]["get"]["security"] == [{"bearer": []}]
        names = {p["name"] for p in spec["paths"][path]["get"]["parameters"]}
        assert "authorization" not in {n.lower() for n in names}  # not a header parameter


def test_every_answered_status_is_documented_and_no_422(spec: dict[str, Any]) -> None:
    answered = {
        SEARCH: {"200", "400", "401", "403", "413", "429", "500", "503"},
        SIMILAR: {"200", "400", "401", "403", "404", "500", "503"},
        CONTACTS: {"200", "400", "401", "403", "500", "503"},
        "/readyz": {"200", "503"},
        "/healthz": {"200"},
    }
    for path, _, op in operations(spec):
        assert set(op["responses"]) == answered[path], path
    assert not {"HTTPValidationError", "ValidationError"} & set(spec["components"]["schemas"])
    search = spec["paths"][SEARCH]["get"]["responses"]
    for status in ("429", "503"):
        assert "Retry-After" in search[status]["headers"]
    bad = resolved(spec, search["400"]["content"]["application/json"]["schema"])
    assert {"detail", "position", "errors"} <= set(bad["properties"])


def test_the_answers_are_typed(spec: dict[str, Any]) -> None:
    for path, _, op in operations(spec):
        for status, answer in op["responses"].items():
            schema = resolved(spec, answer["content"]["application/json"]["schema"])
            assert schema.get("type") == "object" and schema.get("properties"), (path, status)
            assert schema.get("additionalProperties") is not True, (path, status)
    hit = spec["components"]["schemas"]["Hit"]
    assert "from" in hit["required"] and "bcc" not in hit["properties"]
    # Left out where they do not apply, never null: not required, not nullable.
    for name in ("highlights", "thread_hits"):
        assert name not in hit["required"] and "anyOf" not in hit["properties"][name]
    page = spec["components"]["schemas"]["SearchPage"]
    assert set(page["required"]) == {"hits", "next_cursor"}
    assert "did_you_mean" in page["properties"]  # optional: left out on semantic searches
    contact = spec["components"]["schemas"]["Contact"]
    assert set(contact["required"]) == {"email", "name", "messages", "last_ts"}


ROW = {"message_id": "<m@x>", "subject": 5, "ts": 1700000000, "clean_fallback": 1,
       "from_email": "a@x", "from_name": None, "bcc": ["hidden@x"], "thread_messages": 2}


def test_a_hit_is_exactly_what_the_contract_names() -> None:
    before = MALFORMED_FIELDS.labels(field="subject")._value.get()
    hit = hits.render(Candidate("k", "t", 1, 1.0, thread_hits=3), ROW, "semantic")
    assert hit["subject"] is None and hit["clean_fallback"] is True  # a number: not a subject
    assert MALFORMED_FIELDS.labels(field="subject")._value.get() == before + 1
    shown = Hit.model_validate({**hit, "bcc": ["hidden@x"]}).model_dump(
        mode="json", by_alias=True, exclude_unset=True
    )
    assert shown == hit and "bcc" not in shown and "highlights" not in shown


def raising(exc: Exception) -> Any:
    def route() -> None:
        raise exc

    return route


@pytest.mark.parametrize(
    ("exc", "detail"),
    [
        (TransientError("aws: ThrottlingException"), "a backend is unavailable"),
        (BackendUnavailable("dynamodb", "down"), "dynamodb is unavailable"),
        # Credentials refused: the operator's to fix (logged), the caller's to retry.
        (ConfigurationError("opensearch", "403: no role mapping"), "opensearch is unavailable"),
    ],
)
def test_a_transient_failure_is_a_503_naming_the_engine(exc: Exception, detail: str) -> None:
    app = create_app(Settings(), vectors=False)
    app.add_api_route("/boom", raising(exc))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert response.json() == {"detail": detail}


def through_door(component: str) -> Any:
    """A route whose engine call fails as an adapter's does, behind the door naming it."""

    def route() -> None:
        with naming(component):
            raise TransientError("connection refused")

    return route


def test_the_door_names_the_engine_of_the_same_error_it_lets_through() -> None:
    with pytest.raises(TransientError) as caught, naming("qdrant"):
        raise TransientError("down")
    assert type(caught.value) is TransientError and caught.value.component == "qdrant"
    with pytest.raises(ConfigurationError) as refused, naming("qdrant"):
        raise ConfigurationError("opensearch", "403")  # already named: kept
    assert refused.value.component == "opensearch"
    app = create_app(Settings(), vectors=False)
    app.add_api_route("/boom", through_door("opensearch"))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 503 and response.json() == {"detail": "opensearch is unavailable"}


@pytest.mark.parametrize(
    ("exc", "status", "body"),
    [
        (NotFound("no such message in this mailbox"), 404,
         {"detail": "no such message in this mailbox"}),
        (PoisonError("search too costly"), 400, {"detail": "search too costly", "position": 0}),
        (QueryError(3, "unbalanced quote"), 400, {"detail": "unbalanced quote", "position": 3}),
        (CursorError("cursor is not valid"), 400, {"detail": "cursor is not valid"}),
        (RuntimeError("a bug"), 500, {"detail": "internal error"}),
    ],
)
def test_one_handler_answers_each_error_kind(exc: Exception, status: int, body: Any) -> None:
    app = create_app(Settings(), vectors=False)
    app.add_api_route("/boom", raising(exc))
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert (response.status_code, response.json()) == (status, body)
