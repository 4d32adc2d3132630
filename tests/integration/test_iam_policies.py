"""The IAM policies in ``deploy/iam/`` allow every AWS call the sidecar makes, per role.

Every process of the session records its AWS calls (``SIDECAR_AWS_CALL_LOG``, set by
``tests/conftest.py``; a botocore ``before-call`` hook, one line per distinct call and role:
``indexer/adapters/aws/audit.py``). This test runs last: it first drives each role once
itself (each under the role its entry point declares) — so it never passes on an empty
log — then checks every call recorded by the whole
session against that role's policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.audit import API, BACKFILL, OPERATOR, ROLES, TAILER, declared
from indexer.cli.tail_cmds import build_tailer
from indexer.ops.purge import purge
from indexer.ops.reconcile import reconcile
from indexer.settings import Settings, to_env
from indexer.sources.scan import backfill_scan
from search_api.app import create_app
from search_api.auth import token_hash
from sidecar_tools.writer.files import load_file
from tests.support.ops_helpers import sample_subset
from tests.support.pipeline_helpers import (
    export_stream,
    ingest_files,
    opensearch_docs,
    wait_until,
    workers,
)

pytestmark = [pytest.mark.stack, pytest.mark.iam_coverage]

IAM = Path(__file__).resolve().parents[2] / "deploy" / "iam"
S3_ACTIONS = {"ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket",
              "HeadObject": "s3:GetObject", "GetObject": "s3:GetObject"}
BOX = "iam@example.com"


def iam_action(service: str, operation: str) -> str:
    """The IAM action a botocore operation needs (Streams actions are ``dynamodb:``)."""
    if service == "s3":
        return S3_ACTIONS.get(operation, f"s3:{operation}")
    return f"dynamodb:{operation}"


def policy(role: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((IAM / f"{role}.json").read_text(encoding="utf-8"))
    return loaded


def allowed(role: str) -> set[str]:
    return {action for action, _ in grants(role)}


def arn_kind(arn: str) -> str:
    """A policy resource → the kind the call log records (see ``aws_audit.resources``)."""
    if arn.startswith("arn:aws:s3:::"):
        return "object" if arn.endswith("/*") else "bucket"
    table = arn.split(":table/", 1)[1]
    if "/index/" in table:
        return "index"
    if "/stream/" in table:
        return "stream"
    if "/export/" in table:
        return "export"
    return "state" if table.endswith("-sidecar") else "mail"


def grants(role: str) -> set[tuple[str, str]]:
    """(action, resource kind) pairs the role's policy allows."""
    found: set[tuple[str, str]] = set()
    for statement in policy(role)["Statement"]:
        assert statement["Effect"] == "Allow"
        actions, arns = statement["Action"], statement["Resource"]
        for action in [actions] if isinstance(actions, str) else actions:
            found.update((action, arn_kind(arn)) for arn in ([arns] if isinstance(arns, str) else arns))
    return found


def recorded() -> dict[str, set[tuple[str, str]]]:
    """(IAM action, resource kind) pairs per role, from the session's call log."""
    path = Path(os.environ["SIDECAR_AWS_CALL_LOG"])
    calls: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for line in path.read_text(encoding="utf-8").splitlines():
        call = json.loads(line)
        action = iam_action(call["service"], call["operation"])
        kinds = call["resources"] or ["none"]  # e.g. a table outside the settings: "table:x"
        calls[call["role"]].update((action, kind) for kind in kinds)
    return calls


def test_each_policy_is_a_least_privilege_document() -> None:
    assert sorted(p.stem for p in IAM.glob("*.json")) == sorted(ROLES)
    for role in ROLES:
        document = policy(role)
        assert document["Version"] == "2012-10-17"
        for statement in document["Statement"]:
            actions = statement["Action"]
            for action in [actions] if isinstance(actions, str) else actions:
                assert "*" not in action, f"{role}: wildcard action {action}"
            resources = statement["Resource"]
            for resource in [resources] if isinstance(resources, str) else resources:
                assert resource != "*", f"{role}: {statement['Sid']} on every resource"
    assert "dynamodb:CreateTable" in allowed("operator")
    for role in ROLES[:-1]:  # no runtime role may create (or delete) tables
        assert not {"dynamodb:CreateTable", "dynamodb:DeleteTable"} & allowed(role), role


def _drive_every_role(settings: Settings, tmp_path: Path) -> None:
    """One pass of each role's work: init, tail, workers, ingest from S3, backfill, API,
    reconcile, purge."""
    env = {**os.environ, **to_env(settings)}
    init = subprocess.run([sys.executable, "-m", "indexer.cli.main", "init", "--mail-table"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert init.returncode == 0, init.stderr
    ddb = aws.client(settings, "dynamodb")
    load_file(ddb, settings.table, sample_subset(tmp_path, 6), BOX)
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    s3, bucket = aws.client(settings, "s3"), f"iam-{settings.table}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="records/stream.jsonl", Body=records.read_bytes())
    with workers(settings):  # Celery worker processes: they declare "workers" themselves
        tailer, stop = build_tailer(settings, "trim_horizon", stage="all"), threading.Event()
        with declared(TAILER):  # what `sidecar tail` declares (indexer.cli.main)
            thread = threading.Thread(target=tailer.run, args=(stop,))
            thread.start()
            try:
                assert wait_until(lambda: len(opensearch_docs(settings, BOX)) == 6,
                                  timeout=180)
            finally:
                stop.set()
                thread.join(timeout=60)
        with declared(BACKFILL):
            assert ingest_files(settings, [f"s3://{bucket}/records/"]).dead_lettered == 0
            assert backfill_scan(settings, segments=2).dead_lettered == 0
    api = settings.model_copy(update={"api_tokens": json.dumps({token_hash("t"): [BOX]})})
    with declared(API), TestClient(create_app(api)) as client:
        # ready once the model has loaded in the background (/readyz names it until then)
        assert wait_until(lambda: client.get("/readyz").json()["failing"] == [], timeout=180)
        hits = client.get(f"/v1/mailboxes/{BOX}/search", params={"q": "the"},
                          headers={"Authorization": "Bearer t"})
        assert hits.status_code == 200 and hits.json()["hits"], hits.text
    with declared(OPERATOR):
        assert reconcile(settings, mailbox=BOX).drifted == 0
        assert purge(settings, BOX).removed > 0


def test_every_recorded_aws_call_is_allowed_by_its_role(settings: Settings,
                                                        tmp_path: Path) -> None:
    _drive_every_role(settings, tmp_path)
    calls = recorded()
    assert set(ROLES) <= set(calls), f"roles with no recorded call: {set(ROLES) - set(calls)}"
    missing = {role: sorted(found - grants(role)) for role, found in calls.items()}
    assert {role: gaps for role, gaps in missing.items() if gaps} == {}
    print("\nrecorded (action, resource) per role:",
          json.dumps({r: sorted(map(list, c)) for r, c in calls.items()}, indent=1))
