"""The start-up check of every runtime command: the tables it needs exist, or one line on
stderr naming the missing table and the command that creates it (exit status 2)."""

from __future__ import annotations

import sys

import typer

from indexer.settings import Settings


def require_tables(settings: Settings, *, mail: bool = True, state: bool = True) -> None:
    """Stop the command with a one-line error when a needed table is missing."""
    from indexer.adapters import aws
    from indexer.adapters.tables import MissingTableError, needed, require

    try:
        require(aws.client(settings, "dynamodb"), needed(settings, mail=mail, state=state))
    except MissingTableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
