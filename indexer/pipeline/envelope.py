"""A task as a worker receives it, decoded once: what to sync (:class:`TaskPayload`) and the
keys the transport adds beside it — the deployment it was planned for, when it first failed
(the transient budget's clock), when a worker of another deployment first refused it. The
task's own JSON stays as sent (a sink-stage dead letter keeps it, a redrive resends it); a
retry or a refusal resends it with these keys changed, through here only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indexer.core.plan import MessageRef
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.deployment import DEPLOYMENT, REFUSED_SINCE

FIRST_FAILURE = "first_failure"  # payload key: when this batch first failed (epoch seconds)


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and value else None


@dataclass(frozen=True)
class Envelope:
    """One received task; ``raw`` is its JSON as sent."""

    raw: Mapping[str, Any]
    task: TaskPayload
    deployment: Any
    first_failure: float | None
    refused_since: float | None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Envelope:
        """Decode a task's JSON (a ref of the wrong shape raises ``ValueError``)."""
        return cls(dict(raw), TaskPayload.from_json(raw), raw.get(DEPLOYMENT),
                   _seconds(raw.get(FIRST_FAILURE)), _seconds(raw.get(REFUSED_SINCE)))

    @property
    def messages(self) -> list[MessageRef]:
        return list(self.task.messages)

    def retried(self, first_failure: float | None) -> dict[str, Any]:
        """The JSON to send again for a retry: the budget's clock kept, or (``None``) dropped
        — a stall waits for an operator, which is no outage."""
        again = {k: v for k, v in self.raw.items() if k != FIRST_FAILURE}
        return again if first_failure is None else {**again, FIRST_FAILURE: first_failure}

    def refused(self, since: float) -> dict[str, Any]:
        """The JSON to put back on its queue after a refusal, with when refusals began."""
        return {**self.raw, REFUSED_SINCE: since}
