"""`sidecar init` and the tables every runtime command needs.

The indexing flow of docs/using/indexing.md runs as written on a fresh table (each command a subprocess), and
each runtime command started on a missing table stops with one line naming the table and the
command that creates it — no runtime command creates a table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexer.adapters.aws import clients as aws
from indexer.settings import Settings, to_env
from search_api.app import create_app
from tests.support.pipeline_helpers import export_stream, opensearch_docs, table_messages

pytestmark = pytest.mark.stack

SIDECAR = str(Path(sys.executable).parent / "sidecar")
SAMPLE = (Path(__file__).resolve().parents[2] / "tools" / "sidecar_tools" / "demo_data"
          / "sample-mailbox.jsonl")


def _env(settings: Settings) -> dict[str, str]:
    return {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}


def sidecar(settings: Settings, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIDECAR, *args], env=_env(settings), capture_output=True, text=True,
                          timeout=timeout, check=False)


def _tables(ddb: Any) -> set[str]:
    names: set[str] = set()
    for page in ddb.get_paginator("list_tables").paginate():
        names.update(page["TableNames"])
    return names


def test_readme_indexing_flow_on_a_fresh_table(settings: Settings, tmp_path: Path) -> None:
    ddb = aws.client(settings, "dynamodb")
    created = sidecar(settings, "table", "create")
    assert created.returncode == 0, created.stderr
    loaded = sidecar(settings, "load", str(SAMPLE), "--mailbox", "readme@example.com")
    assert loaded.returncode == 0, loaded.stderr
    init = sidecar(settings, "init")
    assert init.returncode == 0, init.stderr
    assert f"table {settings.table}-sidecar: created" in init.stdout
    again = sidecar(settings, "init")
    assert "already exists" in again.stdout and again.returncode == 0

    records = tmp_path / "stream.jsonl"  # what the user's Lambda / Kinesis consumer exported
    assert export_stream(settings, records) > 0
    worker = subprocess.Popen([SIDECAR, "worker"], env=_env(settings), start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ingest = sidecar(settings, "ingest", str(records), "--wait", "--timeout", "600")
    finally:
        worker.terminate()
        worker.wait(timeout=120)
    assert ingest.returncode == 0, ingest.stderr
    # Not a terminal: the summary is a JSON line (a table only in a terminal).
    (done,) = [e for e in map(json.loads, ingest.stderr.splitlines())
               if e["message"] == "ingest done"]
    assert done["dead_lettered"] == 0, ingest.stderr
    table = table_messages(ddb, settings.table, "readme@example.com")
    assert len(table) > 10
    assert set(opensearch_docs(settings, "readme@example.com")) == set(table)


def _one_line_error(result: subprocess.CompletedProcess[str], table: str, command: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert len(lines) == 1, result.stderr
    assert f"'{table}'" in lines[0] and command in lines[0], lines[0]


RUNTIME = [("tail",), ("worker",), ("ingest", "{file}"), ("backfill", "--scan")]


@pytest.mark.parametrize("argv", RUNTIME, ids=lambda a: a[0])
def test_runtime_commands_refuse_a_missing_table(
    argv: tuple[str, ...], settings: Settings, tmp_path: Path
) -> None:
    ddb = aws.client(settings, "dynamodb")
    file = tmp_path / "empty.jsonl"
    file.write_text("")
    args = [a.format(file=file) for a in argv]

    # Neither table: the mail table is named first (its writer creates it).
    _one_line_error(sidecar(settings, *args, timeout=120), settings.table, "sidecar init --mail-table")
    # The mail table but not the sidecar's: `sidecar init`.
    assert sidecar(settings, "table", "create").returncode == 0
    _one_line_error(sidecar(settings, *args, timeout=120), f"{settings.table}-sidecar",
                    "sidecar init")
    mine = {t for t in _tables(ddb) if t.startswith(settings.table)}  # moto is shared
    assert mine == {settings.table}  # the runtime command created nothing


def test_readyz_names_the_missing_table(settings: Settings) -> None:
    ddb = aws.client(settings, "dynamodb")
    assert sidecar(settings, "table", "create").returncode == 0
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 503
        body = ready.json()
        assert "dynamodb" in body["failing"]
        # a fixed code on the public port (issue 38); the table's name is in the log
        assert "sidecar init" in body["errors"]["dynamodb"]
        assert settings.table not in ready.text
    assert sidecar(settings, "init").returncode == 0
    with TestClient(create_app(settings)) as client:
        assert "dynamodb" not in client.get("/readyz").json()["failing"]
    assert f"{settings.table}-sidecar" in _tables(ddb)


def test_init_mail_table_creates_both_with_stream_and_indexes(settings: Settings) -> None:
    ddb = aws.client(settings, "dynamodb")
    result = sidecar(settings, "init", "--mail-table")
    assert result.returncode == 0, result.stderr
    mail = ddb.describe_table(TableName=settings.table)["Table"]
    assert mail["StreamSpecification"] == {"StreamEnabled": True,
                                           "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert {i["IndexName"] for i in mail["GlobalSecondaryIndexes"]} == {"GSI1", "GSI2"}
    state = ddb.describe_table(TableName=f"{settings.table}-sidecar")["Table"]
    assert [k["AttributeName"] for k in state["KeySchema"]] == ["PK", "SK"]
