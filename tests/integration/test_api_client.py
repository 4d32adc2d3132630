"""A client generated from the running API's ``/openapi.json`` (openapi-python-client) works
as generated (issue 27 part 1): it searches, pages with the cursor, collapses threads, finds
similar messages and reads the documented errors as their models — so the document is a
contract a client can be built from, not a description of it."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from indexer.settings import Settings
from tests.support.api_fixtures import TOKEN_A, TOKEN_B, Api, index_all, mail, start_api, store_all

pytestmark = [pytest.mark.stack, pytest.mark.slow]

PACKAGE = f"sidecar_client_{uuid.uuid4().hex[:6]}"  # never an importable name of the repo
THREAD = "<release@example.org>"
MAILBOX = [
    mail(1, "Release 2.5 planning", "The release checklist and changelog for 2.5.",
         sender=("Alice", "alice@example.com"), to=["bob@example.com"], thread=THREAD, day=1),
    mail(2, "Re: Release 2.5 planning", "Changelog draft ready; the release is on Friday.",
         sender=("Bob", "bob@example.com"), to=["alice@example.com"], thread=THREAD, day=2),
    mail(3, "Release notes for 2.4", "Release notes and the checklist of the last release.",
         sender=("Carol", "carol@example.com"), to=["team@example.com"], day=3),
    mail(4, "Lunch on Friday?", "Anyone up for lunch near the office?",
         sender=("Dave", "dave@example.com"), to=["alice@example.com"], day=4),
]


def key(n: int) -> str:
    return hashlib.sha256(f"<msg{n}@example.org>".encode()).hexdigest()


@pytest.fixture
def api(settings: Settings, tmp_path: Path, unique: str) -> Iterator[Api]:
    for running in start_api(settings, tmp_path, f"client-{unique}", f"other-{unique}"):
        store_all(settings, running.mailbox_a, MAILBOX)
        index_all(settings, tmp_path)
        yield running


def generated(api: Api, where: Path) -> ModuleType:
    """The client package generated from the API's document, imported under ``PACKAGE``.
    The generator formats its output with ruff: the venv's, found beside this Python."""
    spec = where / "openapi.json"
    spec.write_text(json.dumps(httpx.get(api.url + "/openapi.json", timeout=30).json()))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [Path(sys.executable).parent / "openapi-python-client", "generate", "--path", str(spec),
         "--meta", "none", "--output-path", str(where / PACKAGE)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr  # nothing skipped
    sys.path.insert(0, str(where))
    return importlib.import_module(PACKAGE)


@pytest.fixture
def client(api: Api, tmp_path: Path) -> Iterator[ModuleType]:
    try:
        yield generated(api, tmp_path)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def module(package: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


def test_a_generated_client_searches_finds_similar_and_reads_errors(
    api: Api, client: ModuleType
) -> None:
    search = module(client, "api.search.search_mailbox")
    similar = module(client, "api.search.similar_messages")
    models = module(client, "models")
    unset = module(client, "types").Unset
    authed = client.AuthenticatedClient(base_url=api.url, token=TOKEN_A)
    box = api.mailbox_a

    first = search.sync(box, client=authed, q="release", limit=2)
    assert isinstance(first, models.SearchPage) and len(first.hits) == 2, first
    hit = first.hits[0]
    assert isinstance(hit, models.Hit) and isinstance(hit.from_, models.Sender)
    assert hit.from_.email in {"alice@example.com", "bob@example.com", "carol@example.com"}
    assert any("<mark>" in s for s in hit.highlights.subject + hit.highlights.clean)
    assert isinstance(hit.thread_hits, unset)  # left out without collapse
    second = search.sync(box, client=authed, q="release", limit=2, cursor=first.next_cursor)
    keys = {h.message_key for h in first.hits + second.hits}
    assert keys == {key(1), key(2), key(3)} and second.next_cursor is None

    collapsed = search.sync(box, client=authed, q="release", collapse="thread")
    assert sorted(h.thread_hits for h in collapsed.hits) == [1, 2]
    semantic = search.sync(box, client=authed, q="planning the release",
                           mode=models.SearchMailboxMode.SEMANTIC)
    assert semantic.hits and isinstance(semantic.hits[0].highlights, unset)

    others = similar.sync(box, key(1), client=authed, limit=5)
    assert isinstance(others, models.SimilarPage) and others.hits
    assert not {h.message_key for h in others.hits} & {key(1), key(2)}  # nor its thread
    with_thread = similar.sync(box, key(1), client=authed, limit=5, exclude_thread=False)
    assert key(2) in {h.message_key for h in with_thread.hits}
    # One API start for both (the pipeline indexes the mailbox first): the errors, as typed.
    documented_errors(api, client)


def documented_errors(api: Api, client: ModuleType) -> None:
    search = module(client, "api.search.search_mailbox")
    similar = module(client, "api.search.similar_messages")
    models = module(client, "models")
    authed = client.AuthenticatedClient(base_url=api.url, token=TOKEN_A)
    box = api.mailbox_a
    bad = search.sync_detailed(box, client=authed, q="(release")
    assert bad.status_code == 400 and isinstance(bad.parsed, models.BadRequest)
    assert isinstance(bad.parsed.position, int)
    wide = search.sync_detailed(box, client=authed, q="release", limit=1000)
    assert wide.status_code == 400 and wide.parsed.errors[0].loc == ["query", "limit"]
    other = client.AuthenticatedClient(base_url=api.url, token=TOKEN_B)
    refused = search.sync_detailed(box, client=other, q="release")
    assert refused.status_code == 403 and isinstance(refused.parsed, models.Problem)
    missing = similar.sync_detailed(box, "a" * 64, client=authed)
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Problem)
    health = module(client, "api.health.readyz").sync(client=client.Client(base_url=api.url))
    assert isinstance(health, models.Readiness) and health.ready
