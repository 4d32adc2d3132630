"""Issue 23 part 6 and 3, on a running ``sidecar serve``: OIDC/JWT bearer tokens beside the
token table (a JWKS served over HTTP by the test, key rotation, rate-limited refetching; a
JWKS file), metrics on their own port only, and an access log that bounds what a client
chose (path, mode)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from indexer.settings import Settings
from search_api.app import create_app
from search_api.auth import TokenConfigError
from tests.conftest import namespaced
from tests.support.api_fixtures import (
    TOKEN_A,
    Api,
    free_port,
    index_all,
    mail,
    start_api,
    store_all,
)
from tests.support.jwt_helpers import (
    AUDIENCE,
    ISSUER,
    Jwks,
    claims,
    ec_key,
    hmac_with_public_key,
    rsa_key,
    serve_jwks,
    sign,
    unsigned,
)
from tests.support.pipeline_helpers import wait_until

pytestmark = [pytest.mark.stack, pytest.mark.slow]

COOLDOWN_S = 2  # least seconds between two JWKS fetches forced by an unknown kid
KEY, EC_KEY = rsa_key("k1"), ec_key("e1")
SENDER = ("Alice Smith", "alice@example.com")


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    with serve_jwks(Jwks([KEY, EC_KEY])) as served:
        yield served


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where ``start_api`` writes the API's log (``api.log``)."""
    return tmp_path_factory.mktemp("identity")


@pytest.fixture(scope="module")
def api(tmp: Path, jwks: Jwks) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    settings = namespaced(
        "id", tmp, unique,
        api_metrics_port=free_port(),
        api_jwt_jwks_url=jwks.url,
        api_jwt_issuer=ISSUER,
        api_jwt_audience=AUDIENCE,
        api_jwt_jwks_cooldown_s=COOLDOWN_S,
    )
    mailbox_a, mailbox_b = f"alice-{unique}", f"bob-{unique}"
    for running in start_api(settings, tmp, mailbox_a, mailbox_b):
        store_all(settings, mailbox_a, [mail(1, "Quarterly budget", "the budget", sender=SENDER,
                                             to=["bob@corp.example"])])
        store_all(settings, mailbox_b, [mail(2, "Other budget", "budget", sender=SENDER,
                                             to=["carol@example.org"])])
        index_all(settings, tmp)
        yield running


def _search(api: Api, token: str, mailbox: str | None = None) -> httpx.Response:
    return api.search("budget", token=token, mailbox=mailbox)


def test_a_valid_jwt_reads_the_mailboxes_of_its_claim(api: Api) -> None:
    for key in (KEY, EC_KEY):  # RS256 and ES256
        answer = _search(api, sign(key, claims([api.mailbox_a])))
        assert answer.status_code == 200, answer.text
        assert [h["subject"] for h in answer.json()["hits"]] == ["Quarterly budget"]
    one = sign(KEY, claims(api.mailbox_a))  # a single string is one mailbox
    assert _search(api, one).status_code == 200
    skewed = sign(KEY, claims([api.mailbox_a], expires_in=-10))  # within the 30 s leeway
    assert _search(api, skewed).status_code == 200
    assert _search(api, TOKEN_A).status_code == 200  # the token table still answers


def test_a_valid_jwt_without_the_mailbox_is_403_whether_it_exists_or_not(api: Api) -> None:
    for body in (claims([api.mailbox_a]), claims(None), claims({"not": "a list"})):
        token = sign(KEY, body)
        existing = _search(api, token, api.mailbox_b)
        missing = _search(api, token, f"no-such-box-{uuid.uuid4().hex[:6]}")
        assert existing.status_code == missing.status_code == 403
        assert existing.json() == missing.json()


def test_invalid_jwts_are_401(api: Api) -> None:
    assert _search(api, sign(KEY, claims([api.mailbox_a]))).status_code == 200  # the control
    wrong_key = rsa_key("k1")  # same kid, another key
    forged = {
        "expired": sign(KEY, claims([api.mailbox_a], expires_in=-120)),
        "wrong audience": sign(KEY, claims([api.mailbox_a], aud="another-app")),
        "wrong issuer": sign(KEY, claims([api.mailbox_a], iss="https://evil.test")),
        "no expiry": sign(KEY, {k: v for k, v in claims([api.mailbox_a]).items() if k != "exp"}),
        "wrong key": sign(wrong_key, claims([api.mailbox_a])),
        "alg none": unsigned(claims([api.mailbox_a]), KEY.kid),
        "HS256 keyed with the public key": hmac_with_public_key(KEY, claims([api.mailbox_a])),
        "not a JWT": "a.b.c",
    }
    for name, token in forged.items():
        answer = _search(api, token)
        assert answer.status_code == 401, (name, answer.text)
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.json() == {"detail": "missing or invalid bearer token"}


def test_a_rotated_key_is_fetched_and_unknown_kids_are_rate_limited(
    api: Api, jwks: Jwks
) -> None:
    assert _search(api, sign(KEY, claims([api.mailbox_a]))).status_code == 200  # set cached
    time.sleep(COOLDOWN_S + 0.5)  # the cooldown is what is tested: a fresh kid may now fetch
    new = rsa_key(f"k-{uuid.uuid4().hex[:6]}")
    jwks.keys.append(new)  # the issuer rotates after the API started
    before = jwks.fetches
    assert _search(api, sign(new, claims([api.mailbox_a]))).status_code == 200
    assert jwks.fetches == before + 1

    time.sleep(COOLDOWN_S + 0.5)  # the cooldown passes (what is tested, not a wait)
    ghost = rsa_key("never-published")
    before, began = jwks.fetches, time.monotonic()
    answers = [_search(api, sign(ghost, claims([api.mailbox_a]))).status_code for _ in range(12)]
    elapsed = time.monotonic() - began
    assert set(answers) == {401}  # unknown kid, after the refetch too
    fetched = jwks.fetches - before
    assert 1 <= fetched <= 1 + int(elapsed // COOLDOWN_S), (fetched, elapsed)


def test_openapi_names_the_bearer_scheme(api: Api) -> None:
    document = httpx.get(f"{api.url}/openapi.json", timeout=10).json()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    search = document["paths"]["/v1/mailboxes/{mailbox_id}/search"]["get"]
    assert search["security"] == [{"bearer": []}]


def test_metrics_only_on_the_metrics_port(api: Api) -> None:
    assert httpx.get(f"{api.url}/metrics", timeout=10).status_code == 404
    port = api.settings.api_metrics_port
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert 'route="/v1/mailboxes/{mailbox_id}/search"' in text
    assert "sidecar_redis_up 1.0" in text
    assert api.mailbox_a not in text


def _requests_logged(log: Path) -> list[dict[str, Any]]:
    entries = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and '"message": "request"' in line:
            entries.append({"line": line, **json.loads(line)})
    return entries


def test_the_access_log_bounds_what_a_client_chose(api: Api, tmp: Path) -> None:
    marker = uuid.uuid4().hex[:16]  # short enough to survive the mode's cut (32 characters)
    assert httpx.get(f"{api.url}/{marker}" + "a" * 30_000, timeout=30).status_code == 404
    assert httpx.get(f"{api.url}/{marker}-%1b[31m%e2%80%aered", timeout=10).status_code == 404
    mode = f"m{marker}" + "x" * 30_000
    assert api.search("budget", mode=mode).status_code == 400
    matched = f"/v1/mailboxes/{api.mailbox_a}/search"

    def logged() -> list[dict[str, Any]]:
        return [e for e in _requests_logged(tmp / "api.log") if marker in e["line"]]

    assert wait_until(lambda: len(logged()) == 3, timeout=10), logged()
    long, escaped, bad_mode = logged()
    for entry in (long, escaped, bad_mode):
        assert len(entry["line"]) < 1_000, len(entry["line"])
    assert long["route"] == "<unmatched>" and long["status"] == 404
    cut = 1 + 16 + 30_000 - 200  # "/" + marker + padding, less the 200 characters kept
    assert long["path"].startswith(f"/{marker}aaa") and long["path"].endswith(f"(+{cut} chars)")
    assert escaped["path"] == f"/{marker}-\\x1b[31m\\u202ered"  # no raw escape, no bidi
    assert bad_mode["route"] == "/v1/mailboxes/{mailbox_id}/search" and bad_mode["status"] == 400
    assert bad_mode["mode"].startswith(f"m{marker}") and bad_mode["mode"].endswith(" chars)")
    assert "path" not in bad_mode and matched not in bad_mode["line"]  # no mailbox id


def test_no_token_is_ever_logged(api: Api, tmp: Path) -> None:
    token = sign(KEY, claims([api.mailbox_a]))
    assert _search(api, token).status_code == 200
    assert _search(api, sign(KEY, claims([api.mailbox_a], aud="x"))).status_code == 401
    text = (tmp / "api.log").read_text(encoding="utf-8", errors="replace")
    assert "JWT bearer token rejected" in text  # the reason is logged ...
    for secret in (token, token.split(".")[2], TOKEN_A):
        assert secret not in text  # ... never a token


def test_a_jwks_file_rotates_by_replacing_it(settings: Settings, tmp_path: Path) -> None:
    """A JWKS file instead of a URL (no backend is needed: 403 is only ever the answer to a
    valid token, so it proves the signature was accepted)."""
    path = tmp_path / "jwks.json"
    published = Jwks([KEY])
    published.write(path)
    jwt_settings = settings.model_copy(update={
        "api_jwt_jwks_file": path, "api_jwt_issuer": ISSUER, "api_jwt_audience": AUDIENCE,
        "api_jwt_jwks_cooldown_s": 0,
    })
    new = ec_key("rotated")

    def status(client: TestClient, key: Any) -> int:
        headers = {"Authorization": f"Bearer {sign(key, claims(['another-box']))}"}
        return client.get("/v1/mailboxes/box/search?q=a", headers=headers).status_code

    with TestClient(create_app(jwt_settings, vectors=False)) as client:
        assert status(client, KEY) == 403
        assert status(client, new) == 401  # not published yet
        published.keys.append(new)
        published.write(path)
        assert status(client, new) == 403  # re-read on the unknown kid
        assert status(client, rsa_key("k1")) == 401  # same kid, another key


def test_incomplete_jwt_settings_stop_the_api_at_start(settings: Settings) -> None:
    incomplete = settings.model_copy(update={"api_jwt_jwks_url": "http://127.0.0.1:1/jwks"})
    with pytest.raises(TokenConfigError, match="ISSUER"), TestClient(create_app(incomplete)):
        pass
    with pytest.raises(ValueError):
        Settings(api_jwt_algorithms=("HS256",))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Settings(api_jwt_algorithms=("none",))  # type: ignore[arg-type]
