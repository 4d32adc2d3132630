"""The payload of a sync task, encoded and decoded here only.

A task names messages (and, for the full-text stage, the participant items a record
touched) — never their content: the worker reads the table itself, so a task is a trigger
like the record that planned it. Senders (the ingestor, a repair, a reindex, a redrive, the
Lambda reader) build a :class:`TaskPayload` and send its JSON; the worker decodes it once.
The JSON is also what a sink-stage dead letter keeps, so a redrive resends it as is. Keys
the transport adds (the deployment stamp, retry clocks) ride beside these and are left to
their owners (:mod:`indexer.pipeline.deployment`, :mod:`indexer.pipeline.tasks`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from indexer.core.plan import MessageRef, ParticipantRef


@dataclass(frozen=True, slots=True)
class TaskPayload:
    """Messages to sync, and the participant items to sync with them (full-text only)."""

    messages: tuple[MessageRef, ...]
    participants: tuple[ParticipantRef, ...] = ()
    # A backfill's batch (an export's or a Scan's rows, mostly of items written long before):
    # the worker's first read of the mail items may be eventually consistent (half the read
    # units; the strong verify read keeps the guarantee: indexer.core.plan).
    replay: bool = False

    @classmethod
    def of(
        cls, messages: Iterable[MessageRef], participants: Iterable[ParticipantRef] = (),
        *, replay: bool = False,
    ) -> TaskPayload:
        return cls(tuple(messages), tuple(participants), replay)

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "messages": [ref.to_json() for ref in self.messages],
            "participants": [ref.to_json() for ref in self.participants],
        }
        if self.replay:
            raw["replay"] = True
        return raw

    def first_read_eventual(self, first_read: str) -> bool:
        """Whether the worker's first read may be eventually consistent: always for a
        replay, else as the deployment's ``SIDECAR_FIRST_READ`` (``first_read``) says."""
        return self.replay or first_read == "eventual"

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TaskPayload:
        """A payload as sent; a ref of the wrong shape raises ``ValueError``."""
        return cls(
            tuple(MessageRef.from_json(r) for r in raw.get("messages", [])),
            tuple(ParticipantRef.from_json(r) for r in raw.get("participants", [])),
            raw.get("replay") is True,
        )
