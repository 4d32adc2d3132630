"""``SIDECAR_AWS_CALL_LOG``: write each distinct AWS call this process makes to a file, with
the sidecar role that made it — the evidence the IAM policies in ``deploy/iam/`` are checked
against (and a way for an operator to see what a deployment really calls).

A botocore ``before-parameter-build`` hook: it sees the call's parameters, so it records the
kind of resource touched (mail or sidecar table, index, stream, bucket, object; never a key).
One line per distinct ``(role, service, operation, resources)`` per process: a set in memory,
so a busy worker writes a handful of lines, not one per call; appended with ``O_APPEND`` so
concurrent processes share one file.

The role is *declared* by the process's entry point, never guessed: the ``sidecar`` command
maps its subcommand to a role (:data:`indexer.cli.main.ROLE_OF_COMMAND`), the Celery worker
declares ``workers`` when it starts, the Lambda handler ``workers`` per invocation. A renamed
module therefore cannot change the evidence. The declaration is process-wide, so every thread
of the process (a tailer's shard readers, a backfill's pool) carries it; :func:`declared`
restores the previous role on exit, so a command run in-process (a test's ``CliRunner``) does
not leave its role behind. Calls made under no declared role (the test writer, test setup,
the tooling) are not written.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

# The roles of deploy/iam/*.json (one policy each).
TAILER: Final = "tailer"
WORKERS: Final = "workers"
API: Final = "api"
BACKFILL: Final = "backfill"
OPERATOR: Final = "operator"
ROLES: Final = (TAILER, WORKERS, API, BACKFILL, OPERATOR)

_seen: set[tuple[str, str, str, str, str]] = set()  # (log, role, service, operation, kinds)
_lock = threading.Lock()
_role: str | None = None


def declare(role: str | None) -> str | None:
    """Make ``role`` this process's role (None: none); returns the role it replaces."""
    global _role
    if role is not None and role not in ROLES:
        raise ValueError(f"unknown IAM role {role!r} (one of {', '.join(ROLES)})")
    previous, _role = _role, role
    return previous


@contextmanager
def declared(role: str | None) -> Iterator[None]:
    """``role`` for the block's duration (every thread of the process), then the previous."""
    previous = declare(role)
    try:
        yield
    finally:
        declare(previous)


def current_role() -> str | None:
    """The role this process declared, or None."""
    return _role


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
    service = client.meta.service_model.service_name

    def before_call(model: Any, params: dict[str, Any], **_: Any) -> None:
        role = _role
        if role is None:
            return
        key = (role, service, str(model.name), ",".join(resources(params, mail, state)))
        with _lock:
            if (str(path), *key) in _seen:
                return
            _seen.add((str(path), *key))
        line = json.dumps({"role": key[0], "service": key[1], "operation": key[2],
                           "resources": key[3].split(",") if key[3] else []}) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    client.meta.events.register("before-parameter-build.*.*", before_call)
