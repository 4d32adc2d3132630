"""The DynamoDB tables the sidecar needs: their definitions, ``sidecar init``, and the check
every runtime command makes before it starts.

No runtime command creates a table: a least-privilege role has no ``CreateTable``, and a
table created by accident (a typo in ``SIDECAR_TABLE``) hides a misconfiguration. An operator
runs ``sidecar init`` once; every other command checks with ``DescribeTable`` and stops with
one line naming the missing table and the command that creates it.

The mail table belongs to the user's writer; its definition lives here too (``sidecar init
--mail-table``, the store writer's ``sidecar table create``) so emulators and tests build it
exactly as AECS-1 Appendix C lays it out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from indexer.adapters.aws.io import classify_error
from indexer.settings import Settings

INIT_HINT = "run `sidecar init` once (an operator with dynamodb:CreateTable)"
MAIL_HINT = (
    "the mail store's writer creates it; for an emulator or a test run "
    "`sidecar init --mail-table` (or `sidecar table create`)"
)


# The sidecar table's TTL attribute (epoch seconds): only dead letters carry it
# (``indexer.adapters.dynamodb.dlq``); DynamoDB deletes an item some time after it passes.
TTL_ATTRIBUTE = "ttl"


class MissingTableError(RuntimeError):
    """A table the command needs does not exist; ``str()`` is the one-line message."""

    def __init__(self, table: str, hint: str) -> None:
        super().__init__(f"DynamoDB table {table!r} does not exist: {hint}")
        self.table = table


@dataclass(frozen=True)
class Needed:
    """A table a command needs and how to create it when it is missing."""

    name: str
    hint: str


def _key_schema(prefix: str) -> list[dict[str, str]]:
    return [{"AttributeName": f"{prefix}PK", "KeyType": "HASH"},
            {"AttributeName": f"{prefix}SK", "KeyType": "RANGE"}]


def state_table_spec(name: str) -> dict[str, Any]:
    """``CreateTable`` arguments of the sidecar's own table (participants, checkpoints,
    leases, backfill marks, dead letters): string PK/SK, on demand; its TTL is turned on
    separately (:func:`enable_ttl`: ``CreateTable`` cannot)."""
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": k, "AttributeType": "S"} for k in ("PK", "SK")],
        "KeySchema": _key_schema(""),
    }


def mail_table_spec(name: str) -> dict[str, Any]:
    """``CreateTable`` arguments of the AECS-1 mail table: GSI1 (inbox), GSI2 (threads), all
    attributes projected, and the NEW_AND_OLD_IMAGES stream the sidecar reads."""
    names = ("", "GSI1", "GSI2")
    return {
        "TableName": name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": _key_schema(""),
        "AttributeDefinitions": [{"AttributeName": f"{n}{k}", "AttributeType": "S"}
                                 for n in names for k in ("PK", "SK")],
        "GlobalSecondaryIndexes": [{"IndexName": n, "KeySchema": _key_schema(n),
                                    "Projection": {"ProjectionType": "ALL"}} for n in names[1:]],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    }


def create(client: Any, spec: dict[str, Any]) -> bool:
    """Create a table from ``spec`` and wait until it is active; an existing table is left as
    is (its definition is not compared). True when this call created it."""
    created = True
    try:
        client.create_table(**spec)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
        created = False
    client.get_waiter("table_exists").wait(TableName=spec["TableName"],
                                           WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    return created


def enable_ttl(client: Any, table: str, attribute: str = TTL_ATTRIBUTE) -> bool:
    """Turn on the table's TTL on ``attribute`` unless it is on (or being turned on) already;
    True when this call turned it on. A table whose TTL is on another attribute, or is being
    turned off, is an error naming it: DynamoDB allows one TTL attribute per table and no
    change while one is in progress."""
    found = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    status, current = found.get("TimeToLiveStatus"), found.get("AttributeName")
    if status in {"ENABLED", "ENABLING"} and current == attribute:
        return False
    if status != "DISABLED":
        raise RuntimeError(
            f"table {table!r}: TTL is {status} on {current!r}; the dead letters need it on "
            f"{attribute!r} (update it, or wait until a change in progress is done)"
        )
    client.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
    )
    return True


def enable_pitr(client: Any, table: str) -> bool:
    """Turn on the table's point-in-time recovery unless it is on; True when this call turned
    it on. ``CreateTable`` cannot (as for TTL), and the CDK app turns it on for the tables it
    creates: a table made by ``sidecar init`` gets the same 35 days of restore points (the
    sidecar table's leases and checkpoints, docs/operations/disaster-recovery.md), and an
    emulated mail table can be exported (``ExportTableToPointInTime`` needs it)."""
    found = client.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]
    status = found.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus")
    if status == "ENABLED":
        return False
    client.update_continuous_backups(
        TableName=table,
        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
    )
    return True


def init_tables(client: Any, settings: Settings, *, mail_table: bool = False) -> dict[str, bool]:
    """``sidecar init``: the sidecar's table (and with ``mail_table`` the mail table) →
    whether each was created now. The sidecar table's TTL and point-in-time recovery are
    turned on either way, so an existing table gets them when ``sidecar init`` runs again; the
    mail table's recovery only when init creates it (on AWS it is the writer's table)."""
    done: dict[str, bool] = {}
    if mail_table:
        done[settings.table] = create(client, mail_table_spec(settings.table))
        if done[settings.table]:
            enable_pitr(client, settings.table)
    state = settings.resolved_state_table
    done[state] = create(client, state_table_spec(state))
    enable_ttl(client, state)
    enable_pitr(client, state)
    return done


def needed(settings: Settings, *, mail: bool = True, state: bool = True) -> list[Needed]:
    """The tables of these settings a command reads or writes."""
    tables = [Needed(settings.table, MAIL_HINT)] if mail else []
    if state:
        tables.append(Needed(settings.resolved_state_table, INIT_HINT))
    return tables


def require(client: Any, tables: Iterable[Needed]) -> None:
    """``DescribeTable`` each one; raise :class:`MissingTableError` for the first missing.

    Other errors (access denied, network) are raised as classified by the DynamoDB adapter.
    """
    for table in tables:
        try:
            client.describe_table(TableName=table.name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise MissingTableError(table.name, table.hint) from None
            raise classify_error(exc) from exc
        except BotoCoreError as exc:
            raise classify_error(exc) from exc
