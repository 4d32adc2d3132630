"""``reconcile``: pure drift rules, then the real stack — indexed by the real pipeline, drift
made by hand in each store, found by kind, repaired, and zero afterwards (API and CLI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.adapters import factories
from indexer.core.documents import MessageState, search_document
from indexer.core.drift import Drift, View, compare, counts, fulltext_view
from indexer.core.plan import MessageRef
from indexer.ops.engines import open_engines
from indexer.ops.reconcile import reconcile
from indexer.settings import Settings, to_env
from sidecar_tools.writer.store import delete_message
from tests.support.ops_helpers import index_mailboxes
from tests.support.pipeline_helpers import table_messages

R1, R2, R3 = (MessageRef("m", c * 64) for c in "abc")


def test_compare_kinds() -> None:
    expected: dict[MessageRef, View | None] = {
        R1: {"subject": "s", "ts": 1},
        R2: {"subject": "s"},
        R3: None,
    }
    actual = {R2: {"subject": "old"}, R3: {"subject": "x"}, MessageRef("m", "d" * 64): {}}
    drift = compare("fulltext", expected, actual)
    assert drift == sorted(
        [
            Drift("fulltext", "missing", R1),
            Drift("fulltext", "stale", R2, ("subject",)),
            Drift("fulltext", "orphan", R3),
            Drift("fulltext", "orphan", MessageRef("m", "d" * 64)),
        ]
    )
    assert counts(drift)["fulltext.orphan"] == 2 and counts(drift)["vectors.missing"] == 0
    assert compare("vectors", {R1: None}, {}) == []  # no point expected, none held


def test_fulltext_view_hashes_clean_and_ignores_participants() -> None:
    state = MessageState(R1, {"subject": "s", "ts": 5}, {"clean": "long body"})
    doc = search_document(state)
    assert doc is not None
    view = fulltext_view(doc)
    assert view is not None and view["clean"] != "long body" and "to" not in view
    assert fulltext_view({**doc, "to": ["x@y.org"]}) == view
    assert fulltext_view({**doc, "clean": "other"}) != view


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "reconcile", *args],
        env={**os.environ, **to_env(settings)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.stack
def test_reconcile_finds_and_repairs_drift(settings: Settings, tmp_path: Path, unique: str) -> None:
    box, other, ghost = f"a-{unique}@x.org", f"b-{unique}@x.org", f"ghost-{unique}@x.org"
    ddb = index_mailboxes(settings, tmp_path, {box: 10, other: 3})
    clean = reconcile(settings)
    assert clean.drifted == 0, clean.to_json()
    sizes = {
        m.mailbox_id: (m.table_messages, m.fulltext_docs, m.vector_points) for m in clean.mailboxes
    }
    assert sizes == {box: (10, 10, 10), other: (3, 3, 3)}

    rows = sorted(table_messages(ddb, settings.table, box).values(), key=lambda r: r["ts"])
    k = [MessageRef(box, r["message_key"]) for r in rows]
    fulltext = factories.fulltext_index(settings)
    ghost_ref = MessageRef(ghost, "f" * 64)
    with open_engines(settings) as engines:
        payload = engines.vectors.existing_payloads([k[3]])[k[3]]
        engines.vectors.delete([k[2]])
        engines.vectors.set_payloads({k[3]: {**payload, "content_hash": "0" * 64}})
        stale_doc = search_document(MessageState(k[1], {**rows[1], "subject": "tampered"}, None))
        fulltext.apply({k[0]: None, k[1]: stale_doc})
        fulltext.apply({ghost_ref: search_document(MessageState(ghost_ref, {"ts": 1}, None))})
    assert delete_message(ddb, settings.table, box, rows[4]["message_id"])

    found = reconcile(settings)
    got = {(d.index, d.kind, d.ref) for d in found.found}
    assert got == {
        ("fulltext", "missing", k[0]),
        ("fulltext", "stale", k[1]),
        ("vectors", "missing", k[2]),
        ("vectors", "stale", k[3]),
        ("fulltext", "orphan", k[4]),
        ("vectors", "orphan", k[4]),
        ("fulltext", "orphan", ghost_ref),
    }
    stale = {d.index: d.fields for d in found.found if d.kind == "stale"}
    assert stale["fulltext"] == ("clean", "subject")  # the tampered doc was written body-less
    assert stale["vectors"] == ("content_hash",)
    assert found.drifted == 7 and found.repaired == 0

    cli = _cli(settings, "--mailbox", box, "--json")
    assert cli.returncode == 1, cli.stderr
    assert json.loads(cli.stdout)["drifted"] == 6

    repaired = reconcile(settings, repair=True)
    assert repaired.drifted == 0 and repaired.repaired == 7, repaired.to_json()
    assert reconcile(settings).drifted == 0
    cli = _cli(settings)
    assert cli.returncode == 0, cli.stderr + cli.stdout
    # Not a terminal: the report is a JSON line on stderr (a table only in a terminal).
    (said,) = [e for e in map(json.loads, cli.stderr.splitlines())
               if e["message"] == "reconcile done"]
    assert said["drifted"] == 0 and said["remaining"] == [], said

    with open_engines(settings):  # this process owns the embedded store: the CLI says so
        busy = _cli(settings, "--mailbox", box)
    assert busy.returncode == 2 and "owned by another process" in " ".join(busy.stderr.split())
