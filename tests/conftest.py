"""Shared fixtures. Stack tests talk to the real services started by ``sidecar stack up``.

The services' addresses come from the same ``SIDECAR_*`` variables as every command, so the
suite can run against any stack. Each test gets its own table / index alias / queues so tests
never see each other's data.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from indexer.settings import Settings

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPORA = SHARED / "corpora"

os.environ.setdefault("SIDECAR_AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Every AWS call the sidecar makes during the session, in this process and in every command
# and worker it starts (they inherit the variable): tests/integration/test_iam_policies.py
# checks each against its role's policy in deploy/iam/.
os.environ.setdefault(
    "SIDECAR_AWS_CALL_LOG",
    str(Path(tempfile.gettempdir()) / f"sidecar-aws-calls-{os.getpid()}.jsonl"),
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The IAM coverage check runs last, so it sees the calls of every test before it."""
    items.sort(key=lambda item: item.get_closest_marker("iam_coverage") is not None)


@pytest.fixture
def unique() -> str:
    """A short unique suffix for per-test resource names."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def settings(unique: str, tmp_path: Path) -> Settings:
    """Settings of the running stack, with a table/index/queue namespace of this test's own."""
    return Settings(
        table=f"t-{unique}",
        opensearch_index=f"mail-{unique}",
        qdrant_collection=f"mail-{unique}",
        qdrant_path=tmp_path / "qdrant",
        queue_prefix=f"q-{unique}",
    )


@pytest.fixture
def ddb(settings: Settings) -> Any:
    """A DynamoDB client on the stack's moto server."""
    from indexer.adapters.aws import client

    return client(settings, "dynamodb")
