"""``SIDECAR_AWS_CALL_LOG``: write each distinct AWS call this process makes to a file, with
the sidecar role that made it — the evidence the IAM policies in ``deploy/iam/`` are checked
against (and a way for an operator to see what a deployment really calls).

A botocore ``before-parameter-build`` hook: it sees the call's parameters, so it records the
kind of resource touched (mail or sidecar table, index, stream, bucket, object; never a key).
One line per distinct ``(role, service, operation, resources)`` per process: a set in memory,
so a busy worker writes a handful of lines, not one per call; appended with ``O_APPEND`` so
concurrent processes share one file. The role is read from the call stack, the outermost
sidecar entry point on it (``indexer.sources.tail`` → tailer, the Celery tasks → workers,
``search_api`` → api, backfill and ingest → backfill, ``sidecar init`` and the ops commands →
operator). Calls made by none of them (the test writer, test setup) are not written.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# Module (or ``module.function``) prefixes → role; the outermost frame that matches wins.
ROLE_OF: tuple[tuple[str, str], ...] = (
    ("indexer.cli.tail_cmds", "tailer"),
    ("indexer.sources.tail", "tailer"),
    ("indexer.cli.pipeline_cmds.worker", "workers"),
    ("indexer.pipeline.tasks", "workers"),
    ("indexer.pipeline.sync", "workers"),
    ("indexer.pipeline.vector_sync", "workers"),
    ("indexer.cli.api_cmds", "api"),
    ("search_api", "api"),
    ("indexer.cli.backfill_cmds", "backfill"),
    ("indexer.sources.backfill", "backfill"),
    ("indexer.sources.scan", "backfill"),
    ("indexer.sources.exports", "backfill"),
    ("indexer.adapters.export_jobs", "backfill"),
    ("indexer.sources.export_backfill", "backfill"),
    ("indexer.cli.pipeline_cmds.ingest", "backfill"),
    ("indexer.sources.files", "backfill"),
    ("indexer.cli.init_cmds", "operator"),
    ("indexer.cli.ops_cmds", "operator"),
    ("indexer.cli.reindex_cmds", "operator"),
    ("indexer.ops", "operator"),
    ("indexer.pipeline.redrive", "operator"),
)

_seen: set[tuple[str, str, str, str]] = set()
_lock = threading.Lock()
_carried = threading.local()  # the role of the thread that handed work to a pool thread
_enabled = False


def carry(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run in a pool thread under the role of the thread submitting it (a pool thread's
    stack holds no entry point). Returns ``fn`` itself while no call log is kept."""
    if not _enabled:
        return fn
    role = role_on_stack()

    def run(*args: Any, **kwargs: Any) -> T:
        _carried.role = role
        try:
            return fn(*args, **kwargs)
        finally:
            _carried.role = None

    return run


def role_on_stack() -> str | None:
    """The outermost sidecar entry point on the current call stack, as a role name."""
    frame: Any = sys._getframe(1)
    found: str | None = None
    while frame is not None:
        where = f"{frame.f_globals.get('__name__', '')}.{frame.f_code.co_name}"
        for prefix, role in ROLE_OF:
            if where == prefix or where.startswith(prefix + "."):
                found = role
                break
        frame = frame.f_back
    return found or getattr(_carried, "role", None)


def resources(params: dict[str, Any], mail: str, state: str) -> list[str]:
    """The kinds of resource a call touches: ``mail`` / ``state`` (the process's mail and
    sidecar tables), ``index`` (a GSI of the mail table), ``stream``, ``export``, ``bucket``,
    ``object``;
    any other table as ``table:<name>``. Never a key or an item."""
    found: list[str] = []
    tables = [params["TableName"]] if "TableName" in params else []
    tables += list(params.get("RequestItems", {}))
    if "TableArn" in params:  # ExportTableToPointInTime
        tables.append(str(params["TableArn"]).split(":table/", 1)[-1])
    for table in tables:
        kind = {mail: "mail", state: "state"}.get(table, f"table:{table}")
        found.append("index" if kind == "mail" and params.get("IndexName") else kind)
    if "ExportArn" in params:  # DescribeExport
        found.append("export")
    if "StreamArn" in params or "ShardIterator" in params:
        found.append("stream")
    if "Bucket" in params:
        found.append("object" if "Key" in params else "bucket")
    return found


def record_calls(client: Any, path: Path, mail: str, state: str) -> None:
    """Register the hook on one client (every operation of its service); ``mail`` and
    ``state`` name the tables of the settings it was built for."""
    global _enabled
    _enabled = True
    service = client.meta.service_model.service_name

    def before_call(model: Any, params: dict[str, Any], **_: Any) -> None:
        role = role_on_stack()
        if role is None:
            return
        key = (role, service, str(model.name), ",".join(resources(params, mail, state)))
        with _lock:
            if key in _seen:
                return
            _seen.add(key)
        line = json.dumps({"role": key[0], "service": key[1], "operation": key[2],
                           "resources": key[3].split(",") if key[3] else []}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    client.meta.events.register("before-parameter-build.*.*", before_call)
