"""Tasks name their deployment; a worker of another refuses them (issue 16), pure parts."""

from __future__ import annotations

import logging

import pytest

from indexer.pipeline import deployment
from indexer.settings import Settings

ONE = Settings(table="prod-mail", opensearch_index="mail", qdrant_collection="mail")
TWO = Settings(table="staging-mail", opensearch_index="mail", qdrant_collection="mail")


def test_a_task_is_accepted_only_by_its_own_deployment() -> None:
    payload = deployment.stamped(ONE, {"messages": []})
    assert deployment.mismatch(ONE, payload) is None
    reason = deployment.mismatch(TWO, payload)
    assert reason and "'prod-mail'" in reason and "'staging-mail'" in reason
    assert deployment.mismatch(TWO, {"messages": []}) is None  # sent by an older version


def test_a_refusal_is_logged_at_most_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    reason = f"test-reason-{id(caplog)}"
    with caplog.at_level(logging.ERROR):
        for _ in range(5):
            deployment.log_refusal(reason)
    assert [r.getMessage() for r in caplog.records].count(
        f"refusing tasks of another deployment: {reason}"
    ) == 1
