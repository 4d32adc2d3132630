"""CLI: ``sidecar init`` — create the sidecar's own DynamoDB table, once, as an operator.

Runtime commands never create tables (a least-privilege role cannot, and should not);
they stop with a one-line error naming the table and this command when it is missing.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from indexer.settings import get_settings


def init(
    mail_table: Annotated[
        bool,
        typer.Option("--mail-table", help="Also create the mail table (GSI1, GSI2, "
                     "NEW_AND_OLD_IMAGES stream): for emulators and tests; on AWS the "
                     "mail store's writer owns it."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {table: created|exists} as one JSON object.")
    ] = False,
) -> None:
    """Create the sidecar's table `<table>-sidecar` (SIDECAR_STATE_TABLE) if missing."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.dynamodb.tables import init_tables

    settings = get_settings()
    done = init_tables(aws.client(settings, "dynamodb"), settings, mail_table=mail_table)
    if as_json:
        typer.echo(json.dumps({t: "created" if c else "exists" for t, c in done.items()}))
        return
    for table, created in done.items():
        typer.echo(f"table {table}: {'created' if created else 'already exists, left as is'}")


def register(app: typer.Typer) -> None:
    app.command()(init)
