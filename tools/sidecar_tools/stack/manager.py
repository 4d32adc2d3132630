"""``sidecar stack up | down | status | env``: the real local stack as plain child processes.

Each spawned service gets its own session (so ``down`` can signal its whole process group), a
log in ``<state_dir>/logs/<name>.log`` and a pid file in ``<state_dir>/pids/<name>.pid`` that
also records the kernel's start time of the process. ``down`` acts only on pid files whose pid
still has that start time, so a recycled pid is never signalled, and a service we did not start
(something already answering on the port) is never recorded, hence never stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from sidecar_tools.stack.components import (
    ComponentStatus,
    Spec,
    StackError,
    env_lines,
    qdrant_state,
    specs,
)
from sidecar_tools.stack.settings import StackSettings

__all__ = ["ComponentStatus", "StackError", "down", "env_lines", "status", "up"]

_STOP_GRACE_S = 20.0
_POLL_S = 0.2
_LOG_TAIL_LINES = 25
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""Keeps our Popen objects alive so the interpreter neither warns about nor forgets them."""


class _Aborted(StackError):
    """This component gave up because another one failed; not worth reporting on its own."""


@dataclass(frozen=True)
class _Record:
    """A pid file: the pid plus its /proc start time, which together name one process."""

    pid: int
    start_time: int


# --- /proc and pid files ------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, pgrp, session, starttime)`` from /proc/<pid>/stat; None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # comm may contain spaces and parens
    return fields[0], int(fields[2]), int(fields[3]), int(fields[19])


def _members(rec: _Record) -> list[int]:
    """Live processes of the group we started: leader and any children left in its group.

    If the pid now names a different process, our group is necessarily empty (Linux does not
    reuse a pid still used as a process-group id), so nothing is returned.
    """
    leader = _stat(rec.pid)
    if leader is not None and leader[3] != rec.start_time:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        st = _stat(int(entry.name)) if entry.name.isdigit() else None
        if st and st[0] not in "ZX" and st[1] == st[2] == rec.pid and st[3] >= rec.start_time:
            found.append(int(entry.name))
    return found


def _alive(rec: _Record) -> bool:
    """The recorded leader itself still runs (a zombie counts as dead)."""
    st = _stat(rec.pid)
    return st is not None and st[0] not in "ZX" and st[3] == rec.start_time


def _pid_file(settings: StackSettings, name: str) -> Path:
    return settings.state_dir.resolve() / "pids" / f"{name}.pid"


def _read_record(settings: StackSettings, name: str) -> _Record | None:
    """The pid file's record, or None when absent or unreadable (treated as not ours)."""
    try:
        data = json.loads(_pid_file(settings, name).read_text(encoding="utf-8"))
        return _Record(int(data["pid"]), int(data["start_time"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_record(settings: StackSettings, name: str, rec: _Record) -> None:
    """Atomic write, so a concurrent ``status`` never reads half a file."""
    path = _pid_file(settings, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(rec)) + "\n", encoding="utf-8")
    tmp.replace(path)


@contextlib.contextmanager
def _stack_lock(settings: StackSettings) -> Iterator[None]:
    """Serialise ``up``/``down`` on one state dir so two of them never race on pid files."""
    state = settings.state_dir.resolve()
    state.mkdir(parents=True, exist_ok=True)
    with (state / "stack.lock").open("a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# --- stopping -----------------------------------------------------------------------------------


def _signal(rec: _Record, sig: signal.Signals) -> None:
    """Signal the whole group at once while its verified leader lives; else its leftovers."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if _alive(rec):
            os.killpg(rec.pid, sig)
            return
    for pid in _members(rec):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _reap(rec: _Record) -> None:
    """Collect the exit status if the leader is our own child, so it does not linger as a zombie."""
    child = _CHILDREN.get(rec.pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(rec.pid, None)


def _wait_gone(recs: list[_Record], deadline: float) -> bool:
    while True:
        for rec in recs:
            _reap(rec)
        if not any(_members(rec) for rec in recs):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_S)


def _stop(recs: list[_Record]) -> None:
    """SIGTERM every group at once (they shut down in parallel), give them the grace period,
    then SIGKILL whatever is left."""
    for rec in recs:
        _signal(rec, signal.SIGTERM)
    if not _wait_gone(recs, time.monotonic() + _STOP_GRACE_S):
        for rec in recs:
            _signal(rec, signal.SIGKILL)
        _wait_gone(recs, time.monotonic() + 5.0)


# --- starting -----------------------------------------------------------------------------------


def _log_tail(settings: StackSettings, name: str) -> str:
    path = settings.state_dir.resolve() / "logs" / f"{name}.log"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:]) or "(empty log)"


def _spawn(settings: StackSettings, spec: Spec, argv: list[str]) -> _Record:
    """Start one service in its own session, output to its log, and record it as ours."""
    logs = settings.state_dir.resolve() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{spec.name}.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=settings.state_dir.resolve())
    _CHILDREN[proc.pid] = proc
    st = _stat(proc.pid)
    rec = _Record(proc.pid, st[3] if st else 0)
    _write_record(settings, spec.name, rec)
    return rec


def _wait_ready(settings: StackSettings, spec: Spec, rec: _Record, abort: threading.Event) -> None:
    """Poll the probe until it answers; fail early when the process dies or another fails."""
    deadline = time.monotonic() + spec.timeout_s
    while not spec.probe():
        if not _alive(rec):
            _reap(rec)
            raise StackError(f"{spec.name} exited before answering at {spec.address}; log tail:\n"
                             f"{_log_tail(settings, spec.name)}")
        if abort.is_set():
            raise _Aborted(spec.name)
        if time.monotonic() >= deadline:
            raise StackError(f"{spec.name} did not answer at {spec.address} within "
                             f"{spec.timeout_s:.0f}s; log tail:\n{_log_tail(settings, spec.name)}")
        time.sleep(_POLL_S)


def _ensure_or_abort(settings: StackSettings, spec: Spec, started: list[tuple[str, _Record]],
                     abort: threading.Event) -> None:
    """Run :func:`_ensure`; on failure tell the other workers at once, so they stop waiting."""
    try:
        _ensure(settings, spec, started, abort)
    except BaseException:
        abort.set()
        raise


def _ensure(settings: StackSettings, spec: Spec, started: list[tuple[str, _Record]],
            abort: threading.Event) -> None:
    """Leave an answering service alone; otherwise start it (unless a live one of ours is
    still starting) and wait until it answers. Records what it started in ``started``."""
    rec = _read_record(settings, spec.name)
    if rec is not None and not _alive(rec):
        _pid_file(settings, spec.name).unlink(missing_ok=True)
        rec = None
    if spec.probe():
        return
    if rec is None:
        if not spec.local:
            raise StackError(f"{spec.name}: {spec.address} is not answering and is not a "
                             "loopback address, so the stack cannot start it")
        argv = spec.argv()
        if abort.is_set():
            raise _Aborted(spec.name)
        rec = _spawn(settings, spec, argv)
        started.append((spec.name, rec))
    _wait_ready(settings, spec, rec, abort)


def _start_all(settings: StackSettings, started: list[tuple[str, _Record]]) -> list[str]:
    """Ensure every component in its own thread; return the failures' messages.

    The first failure (or Ctrl-C here) sets ``abort`` so the other workers stop waiting at
    once instead of running into their own timeouts.
    """
    abort = threading.Event()
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=len(specs(settings))) as pool:
        futures = [pool.submit(_ensure_or_abort, settings, spec, started, abort)
                   for spec in specs(settings)]
        try:
            for future in futures:
                try:
                    future.result()
                except _Aborted:
                    pass
                except StackError as exc:
                    errors.append(str(exc))
        except BaseException:
            abort.set()
            raise
    return errors


def up(settings: StackSettings) -> list[ComponentStatus]:
    """Start every missing component concurrently and wait until all answer.

    On any failure, whatever this call started is stopped again and a :class:`StackError`
    naming each failed component (with its log tail) is raised.
    """
    started: list[tuple[str, _Record]] = []
    with _stack_lock(settings):
        try:
            errors = _start_all(settings, started)
        except BaseException:
            _undo(settings, started)
            raise
        if errors:
            _undo(settings, started)
            raise StackError("\n\n".join(errors))
    return status(settings)


def _undo(settings: StackSettings, started: list[tuple[str, _Record]]) -> None:
    """Roll back a failed ``up``: stop exactly what it started and forget their pid files."""
    _stop([rec for _, rec in started])
    for name, _ in started:
        _pid_file(settings, name).unlink(missing_ok=True)


def down(settings: StackSettings) -> list[str]:
    """Stop what ``up`` started (per pid file) and return their names; idempotent."""
    with _stack_lock(settings):
        records = {spec.name: _read_record(settings, spec.name) for spec in specs(settings)}
        ours = {name: rec for name, rec in records.items() if rec is not None and _members(rec)}
        _stop(list(ours.values()))
        for name in records:
            _pid_file(settings, name).unlink(missing_ok=True)
    return list(ours)


def status(settings: StackSettings) -> list[ComponentStatus]:
    """Probe every component; ``pid`` is set only for a live process that ``up`` started."""
    def one(spec: Spec) -> ComponentStatus:
        rec = _read_record(settings, spec.name)
        pid = rec.pid if rec is not None and _alive(rec) else None
        if spec.probe():
            return ComponentStatus(spec.name, spec.address, "up", pid,
                                   "started by stack up" if pid else "external (not ours)")
        state = "starting" if pid else "down"
        return ComponentStatus(spec.name, spec.address, state, pid, "" if pid else "not answering")

    with ThreadPoolExecutor(max_workers=len(specs(settings))) as pool:
        rows = list(pool.map(one, specs(settings)))
    return [*rows, qdrant_state(settings)]
