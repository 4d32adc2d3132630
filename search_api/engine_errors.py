"""The API's failures of an engine, named: which engine failed travels with the core's
exception, so the app's one handler can answer 503 naming it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from indexer.core.errors import TransientError


class BackendUnavailable(TransientError):
    """An engine this replica cannot use at all (the store never opened here, held by
    another process, or of an older layout): a failure that starts here, with its engine."""

    def __init__(self, component: str, detail: str = "") -> None:
        super().__init__(f"{component} unavailable {detail}".strip())
        self.component = component


@contextmanager
def naming(component: str) -> Iterator[None]:
    """Name the engine on a failure of the core's family as it passes (the adapters' errors
    do not say which engine): the same exception goes on, never wrapped."""
    try:
        yield
    except TransientError as exc:
        if exc.component is None:
            exc.component = component
        raise
