"""The call audit records the role its entry point declared, never one guessed from the stack.

A real botocore client pointed at a closed loopback port: the audit's hook runs before the
request is built, so the call fails to connect and its line is still written.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
import typer
from botocore.config import Config
from typer.testing import CliRunner

import search_api.cli
from indexer.adapters.aws import audit as aws_audit
from indexer.cli.main import ROLE_OF_COMMAND, SERVICE_MODULES, app
from indexer.settings import get_settings

CLOSED = "http://127.0.0.1:9"


def _client(log: Path) -> object:
    client = boto3.client(
        "dynamodb", endpoint_url=CLOSED, region_name="us-east-1",
        aws_access_key_id="k", aws_secret_access_key="s",
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=0.2),
    )
    aws_audit.record_calls(client, log, mail="mail", state="mail-sidecar")
    return client


def _describe(client: object, table: str) -> None:
    with pytest.raises(Exception, match="Could not connect"):
        client.describe_table(TableName=table)  # type: ignore[attr-defined]


def _roles(log: Path) -> list[tuple[str, str, list[str]]]:
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return [(c["role"], c["operation"], c["resources"]) for c in lines]


def test_a_call_under_no_declared_role_is_not_recorded(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    _describe(_client(log), "mail")
    assert _roles(log) == []


def test_a_declared_role_is_recorded_and_the_previous_one_comes_back(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    client = _client(log)
    with aws_audit.declared(aws_audit.TAILER):
        _describe(client, "mail")
        with aws_audit.declared(aws_audit.OPERATOR):
            _describe(client, "mail-sidecar")
        assert aws_audit.current_role() == aws_audit.TAILER
    assert aws_audit.current_role() is None
    _describe(client, "other")  # no role again: not recorded
    assert _roles(log) == [
        ("tailer", "DescribeTable", ["mail"]),
        ("operator", "DescribeTable", ["state"]),
    ]


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown IAM role 'admin'"):
        aws_audit.declare("admin")
    assert aws_audit.current_role() is None


def test_every_service_command_declares_a_role() -> None:
    """A new service command must be given its IAM role (tooling, registered through the
    plugin group, has none)."""
    service = typer.Typer()
    for module in (*SERVICE_MODULES, search_api.cli):  # the API's serve: an entry point
        module.register(service)
    commands = set(typer.main.get_command(service).commands)  # type: ignore[attr-defined]
    assert commands == set(ROLE_OF_COMMAND)
    assert set(ROLE_OF_COMMAND.values()) == set(aws_audit.ROLES)


def test_a_command_records_its_role_and_leaves_none_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sidecar dlq list`` run in-process: its first AWS call (the tables' check) is the
    operator's; after it, this process has no role again."""
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("SIDECAR_AWS_CALL_LOG", str(log))
    monkeypatch.setenv("SIDECAR_AWS_ENDPOINT_URL", CLOSED)
    monkeypatch.setenv("SIDECAR_TABLE", "audit-mail")
    get_settings.cache_clear()  # the command reads the settings above, not a cached copy
    try:
        result = CliRunner().invoke(app, ["dlq", "list"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code != 0  # nothing answers on the closed port
    assert {role for role, _, _ in _roles(log)} == {"operator"}, _roles(log)
    assert aws_audit.current_role() is None
