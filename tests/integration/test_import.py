"""``sidecar import``: real mail (notmuch-lkml rebuilt as an mbox and a Maildir) and hostile
messages, stored with the writer and indexed, on the real stack.

``test_try_it_on_your_own_mail`` runs the commands of docs/getting-started/try-your-mail.md ("Try it on your own mail") as
written (the stack is already up): ``sidecar import`` then ``sidecar serve`` and a search.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.settings import Settings, to_env
from sidecar_tools.mailimport.run import import_path
from sidecar_tools.writer.mapping import to_items
from tests.conftest import CORPORA
from tests.support import hostile_mail
from tests.support.api_fixtures import free_port, serve_process
from tests.support.mail_helpers import corpus, write_maildir, write_mbox
from tests.support.pipeline_helpers import table_messages
from tests.support.waiting import wait_http_ok

pytestmark = [pytest.mark.stack, pytest.mark.slow]

LKML = CORPORA / "notmuch-lkml.jsonl.gz"
FIELDS = ("message_id", "thread_id", "ts", "date", "from_email", "from_name", "subject",
          "in_reply_to", "attachment_count")


def _expected(mailbox: str) -> dict[str, dict[str, Any]]:
    """What `sidecar load` of the corpus's own NormalizedEmail lines would store."""
    out = {}
    for email in corpus(LKML):
        email["metadata"]["subject"] = " ".join((email["metadata"]["subject"] or "").split())
        row = to_items(email, mailbox).message
        out[row["message_key"]] = {f: row[f] for f in FIELDS}
    return out


def _serve(settings: Settings, mailbox: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, **to_env(settings), "SIDECAR_API_PORT": str(port),
           "SIDECAR_ENV": "dev", "SIDECAR_DEV_MAILBOXES": json.dumps([mailbox])}
    proc = serve_process(env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http_ok(url + "/healthz", timeout=180, proc=proc, log=log, what="sidecar serve")
    except AssertionError:
        proc.kill()
        raise
    return proc, url


def test_try_it_on_your_own_mail(settings: Settings, tmp_path: Path) -> None:
    mailbox = "me@example.org"
    mbox = write_mbox(corpus(LKML), tmp_path / "lkml.mbox")
    env = {**os.environ, **to_env(settings)}
    done = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "import", str(mbox), "--mailbox", mailbox],
        env=env, capture_output=True, text=True, timeout=1200, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "│ stored                      │ 176" in done.stdout, done.stdout
    assert "│ indexed (both indexes)      │ 176" in done.stdout, done.stdout

    stored = table_messages(aws.client(settings, "dynamodb"), settings.table, mailbox)
    assert {k: {f: v[f] for f in FIELDS} for k, v in stored.items()} == _expected(mailbox)

    proc, url = _serve(settings, mailbox, tmp_path / "api.log")
    try:
        headers = {"Authorization": "Bearer sidecar-dev-token"}
        search = f"{url}/v1/mailboxes/{mailbox}/search"
        full = httpx.get(search, params={"q": "fscache"}, headers=headers, timeout=60).json()
        assert full["hits"], full
        assert all("cache" in (h["subject"] + json.dumps(h)).lower() for h in full["hits"])
        meaning = {"q": "local caching for a network file system", "mode": "semantic"}
        semantic = httpx.get(search, params=meaning, headers=headers, timeout=60).json()
        assert any("cifs" in h["subject"].lower() for h in semantic["hits"][:5]), semantic
    finally:
        proc.terminate()
        proc.wait(60)


def test_maildir_is_stored_once_and_reimport_changes_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    mailbox = "me@example.org"
    maildir = write_maildir(corpus(LKML), tmp_path / "Maildir")
    assert len(list((maildir / "cur").iterdir())) == 88  # half were marked seen
    first = import_path(settings, maildir, mailbox, index=False)
    assert (first.kind, first.files, first.stored, first.skipped) == ("maildir", 176, 176, [])
    again = import_path(settings, maildir, mailbox, index=False)
    assert (again.stored, again.already_present) == (0, 176)
    stored = table_messages(aws.client(settings, "dynamodb"), settings.table, mailbox)
    assert {k: {f: v[f] for f in FIELDS} for k, v in stored.items()} == _expected(mailbox)


def test_hostile_messages_are_imported_or_reported(settings: Settings, tmp_path: Path) -> None:
    folder = tmp_path / "eml"
    (folder / "nested" / "deeper").mkdir(parents=True)
    for n, (name, make) in enumerate({**hostile_mail.GOOD, **hostile_mail.MALFORMED}.items()):
        (folder / ("nested/deeper" if n % 2 else "") / name).write_bytes(make())
    mailbox = "hostile@example.org"
    summary = import_path(settings, folder, mailbox)
    assert summary.kind == "eml" and summary.files == 8
    assert summary.stored == summary.indexed == len(hostile_mail.GOOD)
    reasons = {Path(s.origin).name: s.reason for s in summary.skipped}
    assert reasons == {"empty.eml": "empty file",
                       "not-mail.eml": "no header fields (not an RFC 5322 message)"}
    assert all(Path(s.origin).exists() for s in summary.skipped)  # the file is named in full

    rows = table_messages(aws.client(settings, "dynamodb"), settings.table, mailbox)
    by_subject = {r["subject"]: r for r in rows.values()}
    assert by_subject["the big log"]["attachment_count"] == 1
    assert by_subject["Fwd: the original"]["attachment_count"] == 1
    assert by_subject["no date here"]["date"] is None
    assert "Réunion café à Paris" in by_subject

    index = factories.fulltext_index(settings)
    body = {"query": {"bool": {"filter": [{"term": {"mailbox_id": mailbox}}],
                               "must": [{"match": {"clean": "R10000 cache flush"}}]}}}
    hits = index.client.search(index=index.alias, body=body, routing=mailbox)["hits"]["hits"]
    assert [h["_source"]["subject"] for h in hits] == ["hostile broken-mime"]


def test_bad_path_and_bad_mailbox_exit_2(settings: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **to_env(settings)}
    (tmp_path / "empty-dir").mkdir()
    for args, needle in (
        ([str(tmp_path / "missing.mbox"), "--mailbox", "m"], "does not exist"),
        ([str(tmp_path / "empty-dir"), "--mailbox", "m"], "neither cur/+new/"),
        ([str(tmp_path), "--mailbox", "a#b"], "must not contain '#'"),
    ):
        done = subprocess.run([sys.executable, "-m", "indexer.cli.main", "import", *args],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert needle in " ".join(done.stderr.split()), done.stderr
