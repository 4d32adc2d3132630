"""Issue 40 part 6: a long command outside a terminal says how far it is. ``sidecar backfill
--scan --json 2>err | cat`` (no TTY on either stream, as in an ECS task or a Kubernetes Job)
writes JSON lines only on stderr, progress lines among them every
``SIDECAR_PROGRESS_INTERVAL_S`` (done/total, rate, ETA, a final one), and its summary as one
JSON object on stdout; ``dlq list --json``, ``reindex --status --json`` and ``init --json`` are
JSON on stdout as well. Without ``--json``, outside a terminal, ``ingest``, ``reindex`` (its
phases and a heartbeat), ``reconcile`` and ``purge`` give their lines and summaries as JSON lines
on stderr too (a table only in a terminal), as do a refusal to start and a crash."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.settings import Settings, to_env
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import export_stream, prepare_tables, workers

pytestmark = pytest.mark.stack

SENDER = ("Ops", "ops@example.org")
MESSAGES = 12


def _sidecar(settings: Settings, tmp: Path, *argv: str, code: int = 0) -> tuple[str, list[str]]:
    """Run ``sidecar ARGV 2>err | cat``; its stdout (through cat) and its stderr lines; it must
    exit with ``code``."""
    err = tmp / "err"
    command = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "indexer.cli.main", *argv))
    env = {**os.environ, **to_env(settings), "SIDECAR_PROGRESS_INTERVAL_S": "0.2"}
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{command} 2>{err} | cat"],
                          env=env, capture_output=True, text=True, timeout=600)
    lines = err.read_text().splitlines()
    assert done.returncode == code, (done.stdout, lines)
    return done.stdout, lines


def test_backfill_outside_a_terminal_logs_json_progress(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    store_all(settings, "box", [mail(n, f"report {n}", "numbers", sender=SENDER,
                                     to=[f"p{n}@example.com"]) for n in range(MESSAGES)])
    with workers(settings):
        # The workers take seconds to index what the scan sent: many 0.2 s intervals.
        stdout, lines = _sidecar(settings, tmp_path, "backfill", "--scan", "--segments", "1",
                                 "--rate-limit", "20", "--json")
    entries = [json.loads(line) for line in lines]  # every stderr line is JSON
    progress = [e for e in entries if e.get("logger") == "sidecar.progress" and "done" in e]
    items = [e for e in progress if e["task"] == "items"]
    assert len(items) >= 3, lines
    assert all({"total", "rate_per_s", "eta_s", "elapsed_s"} <= set(e) for e in items)
    dones = [e["done"] for e in items]
    assert dones == sorted(dones), dones
    assert [e["final"] for e in items].count(True) == 1
    final = items[-1]
    assert final["final"] is True and final["done"] == final["total"] > MESSAGES
    assert all(e["rate_per_s"] > 0 for e in items)
    times = [e["elapsed_s"] for e in items]
    assert times == sorted(times) and times[-1] > times[0]
    summary = json.loads(stdout)  # the summary alone on stdout, through the pipe
    assert summary["applied"] == MESSAGES and summary["dead_lettered"] == 0


def test_ingest_without_json_outside_a_terminal_writes_json_lines_only(
    settings: Settings, tmp_path: Path
) -> None:
    """No ``--json``: nothing on stdout, and stderr — progress while feeding, the heartbeat
    while waiting, the summary (a rich table before) — JSON lines only."""
    prepare_tables(settings)
    store_all(settings, "box", [mail(n, f"ingested {n}", "numbers", sender=SENDER,
                                     to=[f"p{n}@example.com"]) for n in range(MESSAGES)])
    records = tmp_path / "records.jsonl"
    export_stream(settings, records)
    with workers(settings):
        stdout, lines = _sidecar(settings, tmp_path, "ingest", str(records), "--wait")
    assert stdout == ""
    entries = [json.loads(line) for line in lines]  # a table's borders would fail here
    fed = [e for e in entries if e.get("task") == "records" and "done" in e]
    assert fed and fed[-1]["final"] is True and fed[-1]["done"] > 0
    (summary,) = [e for e in entries if e["message"] == "ingest done"]
    # Records (a message's items each have one), every one read applied, none dead-lettered.
    assert summary["read"] == fed[-1]["done"] > MESSAGES
    assert summary["applied"] == summary["read"] - summary["ignored"]
    assert summary["dead_lettered"] == 0
    assert summary["waited"] is True and summary["level"] == "info"
    # The operator's commands after it: their reports JSON lines too, not tables.
    with workers(settings):
        stdout, lines = _sidecar(settings, tmp_path, "reconcile")
        assert stdout == ""
        entries = [json.loads(line) for line in lines]  # rich's spinner wrote a blank line
        (report,) = [e for e in entries if e["message"] == "reconcile done"]
        assert report["drifted"] == 0
        assert [m["table_messages"] for m in report["mailboxes"]] == [MESSAGES]
        stdout, lines = _sidecar(settings, tmp_path, "purge", "--mailbox", "box")
    assert stdout == ""
    said = [json.loads(line) for line in lines]
    assert said[0]["message"] == "purged box" and said[0]["fulltext_docs"] == MESSAGES
    # The table still holds the mail: the warning that it will come back, as a line too.
    assert any("still holds this mailbox" in e["message"] for e in said[1:])


def test_a_command_refusing_to_start_says_so_in_one_json_line(
    settings: Settings, tmp_path: Path
) -> None:
    """No mail table: ``ingest`` stops before reading anything, exit 2, one JSON error line
    naming the table (in a terminal: ``error: ...`` as plain text)."""
    records = tmp_path / "none.jsonl"
    records.write_text("")
    stdout, lines = _sidecar(settings, tmp_path, "ingest", str(records), code=2)
    assert stdout == ""
    (line,) = lines
    entry = json.loads(line)
    assert entry["level"] == "error" and settings.table in entry["message"]


def test_operator_summaries_are_json_on_stdout(settings: Settings) -> None:
    """In-process (the CLI's own runner, this test's settings as its environment): only
    stdout is read, and it must be exactly one JSON object."""
    from typer.testing import CliRunner

    from indexer.cli.main import app
    from indexer.settings import get_settings

    def run(*argv: str) -> object:
        get_settings.cache_clear()
        try:
            done = CliRunner().invoke(app, list(argv), env=to_env(settings))
        finally:
            get_settings.cache_clear()
        assert done.exit_code == 0, (done.stdout, done.stderr)
        return json.loads(done.stdout)

    assert run("init", "--mail-table", "--json") == {
        settings.table: "created", settings.resolved_state_table: "created"}
    again = run("init", "--mail-table", "--json")
    assert isinstance(again, dict) and set(again.values()) == {"exists"}
    assert run("dlq", "list", "--json") == {"count": 0, "entries": []}
    status = run("reindex", "--status", "--json")
    assert isinstance(status, dict) and set(status) == {"aliases", "loose"}


def test_a_crash_outside_a_terminal_is_one_json_line(settings: Settings, tmp_path: Path) -> None:
    """An error nothing handles (here: the export bucket does not exist) is one JSON line at
    error with the traceback in ``error``, exit 1 — not a traceback drawn over a hundred
    lines (in a terminal typer still draws it)."""
    prepare_tables(settings)
    stdout, lines = _sidecar(settings, tmp_path, "ingest", "s3://no-such-bucket-here/x", code=1)
    assert stdout == ""
    entries = [json.loads(line) for line in lines]
    (crash,) = [e for e in entries if e["level"] == "error"]
    assert crash["message"] == "the command failed"
    assert crash["error"].startswith("Traceback") and "NoSuchBucket" in crash["error"]


def test_reindex_outside_a_terminal_logs_its_phases_and_a_heartbeat(
    settings: Settings, tmp_path: Path
) -> None:
    """``sidecar reindex`` (a live index of mapping v1, the code's version as the target):
    its phase messages, a heartbeat naming the phase under way every interval, and its
    summary, all JSON lines on stderr, nothing on stdout."""
    from indexer.adapters.opensearch.family import MAPPING_VERSION
    from indexer.adapters.opensearch.index import OpenSearchIndex, build_client

    target = MAPPING_VERSION if MAPPING_VERSION > 1 else 2
    prepare_tables(settings)
    OpenSearchIndex(build_client(settings), settings.opensearch_index).ensure(1)
    store_all(settings, "box", [mail(n, f"reindexed {n}", "numbers", sender=SENDER,
                                     to=[f"p{n}@example.com"]) for n in range(MESSAGES)])
    records = tmp_path / "records.jsonl"
    export_stream(settings, records)
    with workers(settings):
        _sidecar(settings, tmp_path, "ingest", str(records), "--wait", "--json")
        stdout, lines = _sidecar(settings, tmp_path, "reindex", "--to-version", str(target),
                                 "--settle-s", "1", "--verify-timeout", "120")
    assert stdout == ""
    entries = [json.loads(line) for line in lines]  # every stderr line is JSON
    said = [e for e in entries if e.get("command") == "reindex"]
    beats = [e for e in said if e["message"] == "reindex running"]
    assert beats and all(e["phase"] and e["elapsed_s"] >= 0 for e in beats), said
    # The heartbeat follows the phases: each beat names a phase said before it, in order
    # (how many phases a 0.2 s beat lands in depends on the machine: 12 messages go fast).
    # "starting" is the phase until the first is said (creating a v7 index with its language
    # fields can outlast a beat on a busy node).
    phases = ["starting", *(e["message"] for e in said if e["message"] not in (
        "reindex running", "reindex done"))]
    assert all(beat["phase"] in phases for beat in beats), (phases, beats)
    order = [phases.index(beat["phase"]) for beat in beats]
    assert order == sorted(order), (phases, beats)
    (done,) = [e for e in said if e["message"] == "reindex done"]
    assert done["backfilled"] == MESSAGES
