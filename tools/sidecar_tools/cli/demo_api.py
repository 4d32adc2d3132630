"""The demo's last step: serve the API with the documented dev token and show real calls."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any
from urllib.parse import quote, urlencode

import httpx
from rich.console import Console

from indexer.settings import Settings, to_env
from search_api.auth import DEV_TOKEN

console = Console()


def _examples(mailbox: str) -> list[tuple[str, dict[str, Any]]]:
    base = f"/v1/mailboxes/{quote(mailbox, safe='')}"
    return [
        (f"{base}/search", {"q": "from:priya release", "limit": 3}),
        (f"{base}/search", {"q": "outage has:attachment -budget", "limit": 3}),
        (f"{base}/search", {"q": "server went down at night", "mode": "semantic", "limit": 3}),
        (f"{base}/search", {"q": "budget", "mode": "hybrid", "collapse": "thread", "limit": 3}),
    ]


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise SystemExit("the API did not start; see its output above")


def _show(url: str, path: str, params: dict[str, Any]) -> dict[str, Any]:
    full = f"{url}{path}?{urlencode(params)}"
    console.print(
        f"\n[bold]$ curl -H 'Authorization: Bearer {DEV_TOKEN}' '{full}'[/bold]", soft_wrap=True
    )
    body: dict[str, Any] = httpx.get(
        full, headers={"Authorization": f"Bearer {DEV_TOKEN}"}, timeout=60
    ).json()
    for hit in body.get("hits", []):
        console.print(f"  {hit['score']:.3f}  {hit['subject']}  ({hit['from']['email']})")
    return body


def console_line(url: str, mailbox: str) -> str:
    """Where the search console is (on with ``SIDECAR_ENV=dev``) and the token to type in it:
    the token is never put in the URL (the console keeps it in the tab's session storage)."""
    address = f"{url}/console?{urlencode({'mailbox': mailbox})}"
    return f"[bold]Search console:[/bold] {address}  (token: {DEV_TOKEN})"


def serve_and_show(settings: Settings, mailbox: str) -> None:
    env = {
        **os.environ,
        **to_env(settings),
        "SIDECAR_ENV": "dev",
        "SIDECAR_DEV_MAILBOXES": f'["{mailbox}"]',
    }
    url = f"http://{settings.api_host}:{settings.api_port}"
    proc = subprocess.Popen([sys.executable, "-m", "indexer.cli.main", "serve"], env=env)
    try:
        _wait(url, proc)
        pages = [_show(url, path, params) for path, params in _examples(mailbox)]
        if pages[0].get("hits"):
            key = pages[0]["hits"][0]["message_key"]
            _show(
                url, f"/v1/mailboxes/{quote(mailbox, safe='')}/messages/{key}/similar", {"limit": 3}
            )
        console.print(
            f"\nAPI serving on {url} (OpenAPI: {url}/openapi.json, dev token "
            f"'{DEV_TOKEN}'). Ctrl-C to stop."
        )
        console.print(console_line(url, mailbox), soft_wrap=True)
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
