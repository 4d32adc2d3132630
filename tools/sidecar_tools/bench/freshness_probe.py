"""Run a sidecar process (``sidecar tail``, a Celery worker) with Celery's own signals recorded.

``python -m sidecar_tools.bench.freshness_probe sidecar tail ...`` or ``... celery -A ...
worker ...`` (or ``... sidecar serve``: with the embedded store the API runs the vectors tasks
itself, :mod:`sidecar_tools.bench.query_stream`; the tailer's stream timers it also gets wrap
calls the API never makes) runs the real command in this process after connecting three
receivers that append one JSON line per event to ``$SIDECAR_FRESHNESS_LOG`` (``O_APPEND``: the
tailer and the workers' pool children share one file):

- ``publish`` (``after_task_publish``, in the tailer): the task is in the broker;
- ``start`` / ``end`` (``task_prerun`` / ``task_postrun``, in a worker's pool child): the task's
  work begins and ends; ``end`` carries the task's own result (its ``seconds``, ``embed_s``)
  and, in a worker, the seconds of each call to the table and the engines
  (:mod:`sidecar_tools.bench.freshness_phases`).

Each line has the wall-clock time (``time.time()``: one host, one clock), the task id, its
stage and the message refs of its payload. Nothing of the product is changed or wrapped: the
receivers only observe (the phases add a timer around a few adapter calls), and the command
runs as ``sidecar`` / ``celery`` would run it — except under ``$SIDECAR_FRESHNESS_ABLATE=contacts``,
a measurement's ablation: the full-text task then keeps no contact summary.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from sidecar_tools.bench import freshness_phases

ENV = "SIDECAR_FRESHNESS_LOG"
ABLATE_ENV = "SIDECAR_FRESHNESS_ABLATE"
STAGES = {"sidecar.fulltext": "fulltext", "sidecar.vectors": "vectors",
          "sidecar.contacts": "contacts"}


def _refs(args: Any) -> list[list[str]]:
    """The ``messages`` refs of a sync task's payload (its one positional argument)."""
    try:
        payload = args[0]
        return [list(map(str, ref)) for ref in payload.get("messages", [])]
    except (IndexError, KeyError, TypeError, AttributeError):
        return []


class Recorder:
    """Appends events to one file; one ``write`` per line, so lines of processes never mix."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, event: str, task_id: str, stage: str, refs: list[list[str]],
              **extra: Any) -> None:
        line = {"ev": event, "t": time.time(), "id": task_id, "stage": stage, "refs": refs,
                "pid": os.getpid(), **extra}
        os.write(self._fd, (json.dumps(line) + "\n").encode())


def install(path: str) -> Recorder:
    """Connect the receivers (strong references: they live as long as the process)."""
    from celery.signals import after_task_publish, task_postrun, task_prerun

    rec = Recorder(path)

    def published(sender: Any = None, headers: Any = None, body: Any = None, **_: Any) -> None:
        stage = STAGES.get(str(sender))
        if stage is None or not isinstance(headers, dict):
            return
        args = body[0] if isinstance(body, (list, tuple)) and body else ()
        rec.write("publish", str(headers.get("id")), stage, _refs(args))

    def started(task_id: Any = None, task: Any = None, args: Any = None, **_: Any) -> None:
        stage = STAGES.get(getattr(task, "name", ""))
        if stage is not None:
            freshness_phases.take()  # a fresh start: nothing of an earlier task
            rec.write("start", str(task_id), stage, _refs(args))

    def ended(task_id: Any = None, task: Any = None, args: Any = None, retval: Any = None,
              state: Any = None, **_: Any) -> None:
        stage = STAGES.get(getattr(task, "name", ""))
        if stage is None:
            return
        result = retval if isinstance(retval, dict) else {}
        rec.write("end", str(task_id), stage, _refs(args), state=str(state),
                  seconds=result.get("seconds"), embed_s=result.get("embed_s"),
                  embedded=result.get("embedded"), phases=freshness_phases.take())

    after_task_publish.connect(published, weak=False)
    task_prerun.connect(started, weak=False)
    task_postrun.connect(ended, weak=False)
    return rec


def main() -> None:
    """``freshness_probe sidecar ARGS`` or ``freshness_probe celery ARGS``."""
    program, *args = sys.argv[1:]
    recorder = install(os.environ[ENV])
    sys.argv = [program, *args]
    if program == "celery":
        from celery.__main__ import main as celery_main

        freshness_phases.install(without_contacts=os.environ.get(ABLATE_ENV) == "contacts")

        celery_main()
    elif program == "sidecar":
        from indexer.cli.main import app

        freshness_phases.install_tailer(recorder)

        app()
    else:
        raise SystemExit(f"freshness_probe: unknown program {program!r} (sidecar | celery)")


if __name__ == "__main__":
    main()
