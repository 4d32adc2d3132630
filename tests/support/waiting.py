"""Waiting on conditions, not on time: the one place a test polls.

A test that needs something to have happened (a server to listen, a write to land, a thread
to block) waits for exactly that, up to a timeout, and fails with a message that says what
did not happen. A fixed pause either wastes the time or, on a loaded machine, is too short. Sleeps that are themselves what a test exercises (an outage's length, a paced write
rate, a cooldown) stay in the tests, each with a comment saying so.

Light on purpose (no ``indexer`` import): the unit tier uses it too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


def _poll(predicate: Callable[[], T], timeout: float, interval: float) -> T | None:
    """``predicate()``'s first truthy value within ``timeout`` s (asked once more at the end),
    else None. Whatever ``predicate`` raises goes through."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def wait_until(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.5) -> bool:
    """True as soon as ``predicate()`` is truthy; False after ``timeout`` seconds (the caller
    asserts, with its own message)."""
    return _poll(predicate, timeout, interval) is not None


def wait_for(
    predicate: Callable[[], T],
    *,
    timeout: float,
    message: str | Callable[[], str],
    interval: float = 0.2,
) -> T:
    """``predicate()``'s first truthy value; an AssertionError with ``message`` (a string, or
    what a callable returns then, e.g. a log's tail) when none came within ``timeout`` s."""
    found = _poll(predicate, timeout, interval)
    if found is None:
        text = message() if callable(message) else message
        raise AssertionError(f"not within {timeout:g} s: {text}")
    return found


def http_ok(url: str, timeout: float = 2) -> bool:
    """``url`` answers 200 (False while nothing listens)."""
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def wait_http_ok(
    url: str, *, timeout: float, proc: Any = None, log: Path | None = None, what: str = "server"
) -> None:
    """Until ``url`` answers 200. With ``proc`` (a Popen), fail at once if it exits; the
    message ends with the tail of ``log``."""

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log is not None else ""

    def up() -> bool:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}) before {url} answered\n"
                                 + tail())
        return http_ok(url)

    wait_for(up, timeout=timeout, interval=0.5, message=lambda: f"{what}: {url} not 200\n" + tail())


def file_contains(path: Path, text: str) -> bool:
    """``text`` is in the file at ``path`` (False while it does not exist)."""
    try:
        return text in path.read_text(errors="replace")
    except FileNotFoundError:
        return False
