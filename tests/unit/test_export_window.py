"""Incremental export windows (15 min .. 24 h each) and the stream-gap repair command."""

from __future__ import annotations

import itertools

import pytest

from indexer.core.export_window import (
    GAP_MARGIN_S,
    MAX_S,
    MIN_S,
    Window,
    gap_command,
    iso,
    parse_time,
    windows,
)

T0 = parse_time("2026-12-01T00:00:00Z")


def test_times_parse_as_utc_iso_or_epoch() -> None:
    assert T0 == 1796083200
    assert parse_time("2026-12-01T00:00:00") == T0 == parse_time("2026-12-01T01:00:00+01:00")
    assert parse_time(str(T0)) == T0
    assert iso(T0) == "2026-12-01T00:00:00Z"
    with pytest.raises(ValueError, match="neither ISO 8601"):
        parse_time("yesterday")


def test_windows_cover_the_range_within_the_limits() -> None:
    assert windows(T0, T0 + 3600) == [Window(T0, T0 + 3600)]
    assert windows(T0, T0 + 60) == [Window(T0 + 60 - MIN_S, T0 + 60)]  # widened backwards
    long = windows(T0, T0 + 2 * MAX_S + 5 * 60)
    assert [w.end for w in long] == [T0 + MAX_S, T0 + 2 * MAX_S, T0 + 2 * MAX_S + 300]
    assert long[-1] == Window(T0 + 2 * MAX_S + 300 - MIN_S, T0 + 2 * MAX_S + 300)
    for part in long:
        assert part.start is not None and part.end is not None
        assert MIN_S <= part.end - part.start <= MAX_S
    assert long[0].start == T0
    for earlier, later in itertools.pairwise(long):
        assert later.start is not None and earlier.end is not None and later.start <= earlier.end
    with pytest.raises(ValueError, match="before it starts"):
        windows(T0, T0)
    assert Window().key == "full" and not Window().incremental
    assert Window(T0, T0 + 900).key == f"{T0}..{T0 + 900}"


def test_gap_command_is_an_incremental_export_of_the_gap() -> None:
    command = gap_command(T0, T0 + 7200)
    start = iso(T0 - GAP_MARGIN_S)
    assert command == f"sidecar backfill --export --from {start} --to {iso(T0 + 7200)}"
    assert gap_command(None, T0) == "sidecar backfill --export"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["backfill"], "give one of"),
        (["backfill", "--scan", "--export"], "give one of"),
        (["backfill", "--scan", "--from", "2026-12-01"], "go with --export"),
        (["backfill", "--export", "--bucket", "b", "--to", "2026-12-01"], "--to needs --from"),
        (["backfill", "--export", "--bucket", "b", "--from", "soon"], "neither ISO 8601"),
    ],
)
def test_backfill_arguments_are_checked_before_anything_runs(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from indexer.cli.main import app

    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split()), result.output
