"""Tasks name their deployment; a worker of another refuses them (issue 16), pure parts."""

from __future__ import annotations

import logging

import pytest

from indexer.pipeline import deployment
from indexer.pipeline.envelope import Envelope
from indexer.settings import Settings

ONE = Settings(table="prod-mail", opensearch_index="mail", qdrant_collection="mail")
TWO = Settings(table="staging-mail", opensearch_index="mail", qdrant_collection="mail")


def test_a_task_is_accepted_only_by_its_own_deployment() -> None:
    stamp = Envelope.of(deployment.stamped(ONE, {"messages": []})).deployment
    assert deployment.mismatch(ONE, stamp) is None
    reason = deployment.mismatch(TWO, stamp)
    assert reason and "'prod-mail'" in reason and "'staging-mail'" in reason
    unstamped = Envelope.of({"messages": []}).deployment  # sent by an older version
    assert deployment.mismatch(TWO, unstamped) is None


def test_a_refusal_is_logged_at_most_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    reason = f"test-reason-{id(caplog)}"
    with caplog.at_level(logging.ERROR):
        for _ in range(5):
            deployment.log_refusal(reason)
    assert [r.getMessage() for r in caplog.records].count(
        f"refusing tasks of another deployment: {reason}"
    ) == 1


def test_the_envelope_keeps_the_task_and_changes_only_the_transport_keys() -> None:
    """A task is decoded once; a retry keeps its budget's clock or drops it (a stall), a
    refusal adds when refusals began, and nothing else of the JSON moves."""
    from indexer.core.plan import MessageRef
    from indexer.core.task_payload import TaskPayload

    sent = deployment.stamped(ONE, TaskPayload.of([MessageRef("m@x", "k1")]).to_json())
    envelope = Envelope.of(sent)
    assert envelope.messages == [MessageRef("m@x", "k1")]
    assert envelope.first_failure is None and envelope.refused_since is None
    again = Envelope.of(envelope.retried(1000.0))
    assert again.first_failure == 1000.0 and again.task == envelope.task
    assert again.deployment == envelope.deployment
    assert "first_failure" not in again.retried(None)
    assert Envelope.of(envelope.refused(2000.0)).refused_since == 2000.0
    assert {k: v for k, v in again.raw.items() if k != "first_failure"} == sent
