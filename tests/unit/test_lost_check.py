"""The broker's lost-task check answers "not lost" while Redis does not answer (no service:
the URL names a port nothing listens on), and never calls a skipped stage's result lost."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from indexer.adapters.broker import lost_task_check
from indexer.settings import Settings


@dataclass
class _Result:
    id: str
    state: str = "PENDING"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_is_lost_while_redis_is_down() -> None:
    settings = Settings(redis_url=f"redis://127.0.0.1:{_closed_port()}/0")
    lost = lost_task_check(settings)
    assert lost([_Result("a"), _Result("b")]) == [False, False]
    assert lost([object()]) == [False]  # no task id: a stage another reader applies
