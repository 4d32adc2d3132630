"""Progress of long commands (``backfill``, ``ingest``, ``reindex``, export polling) that
says something wherever the command runs.

Why: in a terminal a rich bar is the right answer. In an ECS task or a Kubernetes Job there is
no TTY: rich then prints only the bar's final frame, so a multi-hour backfill said nothing until
it ended. Outside a terminal the same progress object (a rich ``Progress`` with its display
off, so the sources that advance it are unchanged) logs one JSON line per task every
``SIDECAR_PROGRESS_INTERVAL_S`` (default 15 s, so "at least every 30 s" holds with room):
done, total, rate, ETA. The human messages a command prints along the way (an export's status,
a reindex's phase) become JSON lines there too, so stderr is JSON lines only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import Progress, ProgressColumn

from indexer import logs

log = logging.getLogger("sidecar.progress")


def interactive(console: Console) -> bool:
    """A person watches: the console's stream is a terminal."""
    return console.is_terminal


def _audible() -> None:
    """Progress is info; a command's default level is warning (the operator's level wins)."""
    log.setLevel(logs.chosen_level() or logging.INFO)


def say(console: Console, message: str, **fields: Any) -> None:
    """A message for the operator: printed in a terminal, else one JSON line (with
    ``fields``) on stderr."""
    if interactive(console):
        console.print(message)
        return
    _audible()
    log.info(message, extra=fields)


class JsonProgress(Progress):
    """rich's ``Progress`` without a display: it still counts (``advance``/``update``) and
    measures speed; a thread logs every task's state every ``interval_s`` and once at the
    end."""

    def __init__(self, command: str, interval_s: float) -> None:
        super().__init__(disable=True)
        self._command, self._interval = command, interval_s
        self._began = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        super().start()
        _audible()
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name="progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self.report(final=True)
        super().stop()

    def _beat(self) -> None:
        while not self._done.wait(self._interval):
            self.report()

    def report(self, final: bool = False) -> None:
        """One line per task: done/total, the recent rate (rich's estimate over its last 30 s,
        else the average since the task began), the ETA where the total is known."""
        elapsed = time.monotonic() - self._began
        if not self.tasks:  # nothing counted yet (an export being made): still alive
            log.info("%s running", self._command, extra={
                "command": self._command, "elapsed_s": round(elapsed, 1), "final": final})
        for task in self.tasks:
            total, done = task.total, task.completed
            speed = task.finished_speed if task.finished else task.speed
            if speed is None and task.elapsed:  # one sample (one big page): the average
                speed = done / task.elapsed
            eta = (total - done) / speed if total and speed else None
            log.info(
                "%s progress: %s %d/%s", self._command, task.description, done,
                "?" if total is None else f"{total:.0f}",
                extra={
                    "command": self._command,
                    "task": task.description,
                    "done": int(done),
                    "total": None if total is None else int(total),
                    "percent": round(100 * done / total, 1) if total else None,
                    "rate_per_s": None if speed is None else round(speed, 2),
                    "eta_s": None if eta is None else round(eta),
                    "elapsed_s": round(elapsed, 1),
                    "final": final,
                },
            )


def progress(
    console: Console, command: str, interval_s: float, *columns: ProgressColumn
) -> Progress:
    """A bar in a terminal; JSON progress lines anywhere else."""
    if interactive(console):
        return Progress(*columns, console=console)
    return JsonProgress(command, interval_s)


@contextmanager
def heartbeat(console: Console, command: str, interval_s: float,
              **fields: Any) -> Iterator[dict[str, Any]]:
    """For work without counted units (a reindex's phases): outside a terminal, a JSON line
    every ``interval_s`` with the elapsed time and whatever the caller put in the yielded
    dict (its phase, what it counted so far). In a terminal: nothing (the command's own
    messages are shown)."""
    state: dict[str, Any] = dict(fields)
    if interactive(console):
        yield state
        return
    _audible()
    began, done = time.monotonic(), threading.Event()

    def beat() -> None:
        while not done.wait(interval_s):
            log.info("%s running", command, extra={
                "command": command, "elapsed_s": round(time.monotonic() - began, 1), **state})

    thread = threading.Thread(target=beat, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        done.set()
        thread.join()
