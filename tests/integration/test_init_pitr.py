"""`sidecar init` turns on point-in-time recovery on the tables it creates (issue 40 item 7),
as the CDK app does for its own: a table made by init has restore points
(docs/operations/disaster-recovery.md) and an emulated mail table can be exported.

Against moto's DynamoDB (``UpdateContinuousBackups`` / ``DescribeContinuousBackups``): the
sidecar table gets it whether init creates it or finds it, the mail table only when init
creates it (on AWS that table is the writer's, and init leaves it as it is)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import create, init_tables, mail_table_spec, state_table_spec
from indexer.settings import Settings

pytestmark = pytest.mark.stack


def _pitr(ddb: Any, table: str) -> str:
    found = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
    return str(found["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"])


def test_init_enables_pitr_on_the_tables_it_creates(settings: Settings) -> None:
    ddb = aws.client(settings, "dynamodb")
    state = settings.resolved_state_table
    try:
        assert init_tables(ddb, settings, mail_table=True) == {settings.table: True, state: True}
        assert _pitr(ddb, settings.table) == "ENABLED"
        assert _pitr(ddb, state) == "ENABLED"
        # again: nothing created, recovery still on, no error
        assert init_tables(ddb, settings, mail_table=True) == {settings.table: False,
                                                               state: False}
        assert _pitr(ddb, state) == "ENABLED"
    finally:
        for table in (settings.table, state):
            ddb.delete_table(TableName=table)


def test_init_turns_pitr_on_for_an_existing_sidecar_table_only(settings: Settings) -> None:
    """Tables made before this change (or by hand): the sidecar's own gets recovery on the
    next `sidecar init`; an existing mail table (the writer's) is not touched."""
    ddb = aws.client(settings, "dynamodb")
    state = settings.resolved_state_table
    try:
        assert create(ddb, mail_table_spec(settings.table))
        assert create(ddb, state_table_spec(state))
        assert _pitr(ddb, settings.table) == "DISABLED" and _pitr(ddb, state) == "DISABLED"
        assert init_tables(ddb, settings, mail_table=True) == {settings.table: False,
                                                               state: False}
        assert _pitr(ddb, state) == "ENABLED"
        assert _pitr(ddb, settings.table) == "DISABLED"
    finally:
        for table in (settings.table, state):
            ddb.delete_table(TableName=table)
