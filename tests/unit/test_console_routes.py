"""The search console's page: when it is served, and with which headers (no service needed:
the console routes never touch a backend, so the app's lifespan is not started)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from indexer.settings import Settings
from search_api.app import create_app
from sidecar_tools.cli.demo_api import console_line

PATHS = ("/console", "/console/console.js", "/console/console.css", "/console/favicon.svg")


@pytest.mark.parametrize(
    ("env", "console", "served"),
    [
        ("dev", None, True),
        ("prod", None, False),
        ("prod", True, True),
        ("dev", False, False),
    ],
)
def test_console_on_in_dev_else_only_when_enabled(
    env: str, console: bool | None, served: bool
) -> None:
    settings = Settings(env=env, console=console)
    assert settings.console_enabled is served
    client = TestClient(create_app(settings))
    for path in PATHS:
        assert client.get(path).status_code == (200 if served else 404), path


def test_console_setting_read_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIDECAR_CONSOLE", "true")
    assert Settings().console_enabled is True


def test_strict_csp_no_inline_script_no_cdn() -> None:
    client = TestClient(create_app(Settings(env="dev")))
    page = client.get("/console")
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe" not in csp and "http" not in csp  # no inline/eval, no other origin
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page.text, re.S)
    assert scripts == [""]  # one external script, nothing inline
    assert not re.search(r"\son[a-z]+\s*=", page.text)  # no inline event handlers
    js = client.get("/console/console.js").text
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js
    for path in PATHS[:3]:  # nothing from another origin (a CDN): no absolute URL at all
        assert not re.search(r"https?:|//[a-z]", client.get(path).text.replace("// ", "")), path
    assert "console" not in client.get("/openapi.json").text  # not part of the public API


def test_demo_prints_console_address_without_the_token_in_it() -> None:
    line = console_line("http://127.0.0.1:8080", "demo@example.com")
    assert "http://127.0.0.1:8080/console?mailbox=demo%40example.com" in line
    assert "(token: sidecar-dev-token)" in line
    assert "token=" not in line
