"""Shared fixtures. Stack tests talk to the real services started by ``sidecar stack up``.

The services' addresses come from the same ``SIDECAR_*`` variables as every command, so the
suite can run against any stack. Each test gets its own table / index alias / queues so tests
never see each other's data.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.settings import Settings
from tests import outside_guard
from tests.outside_guard import install_outside_guard

# Real list mail the suite carries (provenance and licence: tests/data/corpora/README.md).
CORPORA = Path(__file__).resolve().parent / "data" / "corpora"

os.environ.setdefault("SIDECAR_AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Every AWS call the sidecar makes during the session, in this process and in every command
# and worker it starts (they inherit the variable): tests/integration/test_iam_policies.py
# checks each against its role's policy in deploy/iam/.
os.environ.setdefault(
    "SIDECAR_AWS_CALL_LOG",
    str(Path(tempfile.gettempdir()) / f"sidecar-aws-calls-{os.getpid()}.jsonl"),
)


# Nothing outside the repository is read by a test (tests/outside_guard.py): armed here, once.
install_outside_guard()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if outside_guard.OUTSIDE_READS:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def unique() -> str:
    """A short unique suffix for per-test resource names."""
    return uuid.uuid4().hex[:10]


def namespaced(prefix: str, tmp: Path, unique: str | None = None, **overrides: Any) -> Settings:
    """Settings of the running stack with a namespace of their own: table, index, collection
    and queues all named ``{prefix}-{unique}``, the embedded store under ``tmp``. The one
    place a test (``settings``) or a module's API fixture makes its namespace."""
    name = f"{prefix}-{unique or uuid.uuid4().hex[:8]}"
    fields: dict[str, Any] = {
        "table": name,
        "opensearch_index": name,
        "qdrant_collection": name,
        "qdrant_path": tmp / "qdrant",
        "queue_prefix": name,
    }
    return Settings(**{**fields, **overrides})


@pytest.fixture
def settings(unique: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Settings]:
    """Settings of the running stack, with a table/index/queue namespace of this test's own.

    After a stack test its indices are deleted: the suite made ~260, and a node with a 512 MB
    heap met its circuit breaker near the end of a run."""
    made = namespaced("t", tmp_path, unique)
    yield made
    if request.node.get_closest_marker("stack") is not None:
        _drop_indices(made, made.opensearch_index)


def _drop_indices(settings: Settings, prefix: str) -> None:
    """Delete the test's indices with the sidecar's own client; a node that is down is left
    as it is (a test that stops it runs a private one)."""
    from opensearchpy.exceptions import OpenSearchException

    from indexer.adapters.opensearch.index import build_client

    with contextlib.suppress(OpenSearchException):
        build_client(settings).indices.delete(
            index=f"{prefix}*", ignore_unavailable=True, expand_wildcards="all"
        )


@pytest.fixture
def ddb(settings: Settings) -> Any:
    """A DynamoDB client on the stack's moto server."""
    from indexer.adapters.aws.clients import client

    return client(settings, "dynamodb")


# --- A real Qdrant server (tests marked ``qdrant_server``) ------------------------------------

_QDRANT_ABSENT = (
    "qdrant server tests not collected: no binary at ../shared/tools/qdrant/qdrant "
    "(set SIDECAR_QDRANT_BIN to a Qdrant server binary to run them)"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without a server binary the server tests are dropped (never reported as passed); the
    IAM coverage check runs last, so it sees the calls of every test before it."""
    from sidecar_tools.stack.qdrant_server import server_binary

    items.sort(key=lambda item: item.get_closest_marker("iam_coverage") is not None)
    if server_binary() is not None:
        return
    dropped = [i for i in items if i.get_closest_marker("qdrant_server")]
    if dropped:
        items[:] = [i for i in items if not i.get_closest_marker("qdrant_server")]
        config.hook.pytest_deselected(items=dropped)
        config.stash[_ABSENT_KEY] = len(dropped)


_ABSENT_KEY = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for path in sorted(set(outside_guard.OUTSIDE_READS)):
        terminalreporter.write_line(f"FAILED: read outside the repository: {path}", red=True)
    dropped = config.stash.get(_ABSENT_KEY, 0)
    if dropped:
        terminalreporter.write_line(f"{_QDRANT_ABSENT}: {dropped} test(s)")


@pytest.fixture(scope="session")
def qdrant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Qdrant server for the session, started with an API key."""
    from sidecar_tools.stack.qdrant_server import server_binary, start_server

    binary = server_binary()
    assert binary is not None  # collection drops these tests otherwise
    server = start_server(binary, tmp_path_factory.mktemp("qdrant-server"), "test-key-0123")
    yield server
    server.stop()
