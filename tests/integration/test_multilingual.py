"""Mail in any language (issue 43, part 4), on the real stack: the shipped multilingual set
(``tests/data/multilingual``) is indexed through the pipeline and searched through the API's
own code. Each query is an inflected form the message does not hold as typed; with mapping v7
a stemmed word matches in its own language, CJK still matches by bigrams, an index of an
older version is written without the language fields and still searched, and ``sidecar
reindex`` moves it to v7."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexer.adapters import factories
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.core.documents import MessageState, point_id, search_document
from indexer.core.language import ANALYZERS, detect, for_version
from indexer.core.plan import MessageRef
from indexer.pipeline.sync import sync_fulltext
from indexer.settings import Settings, to_env
from search_api.app import create_app
from search_api.auth import token_hash
from search_api.backends import Backends
from search_api.candidates import fulltext, fulltext_body
from search_api.query import parse
from search_api.query.clauses import in_languages
from sidecar_tools.quality.corpus import read_corpus
from sidecar_tools.quality.local_index import eval_namespace
from sidecar_tools.quality.suite import DEFAULT_CORPORA, index_suites, judge_suite, load_suites
from sidecar_tools.writer.mapping import to_items
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import ingest_fulltext, prepare_tables, workers

DATA = Path(__file__).resolve().parents[1] / "data" / "multilingual"


def test_each_message_of_the_set_is_detected_in_its_language() -> None:
    emails = read_corpus(DEFAULT_CORPORA / "multilingual.jsonl")
    got = [(e["messageId"].split("-", 1)[0],
            detect(e["metadata"]["subject"], e["content"]["clean"])) for e in emails]
    right = sum(want == found for want, found in got)
    assert right / len(got) >= 0.95, [g for g in got if g[0] != g[1]]
    assert {want for want, _ in got} >= {"de", "fr", "es", "it", "pt", "nl"}
    assert detect(None, "") == "und" and detect("", "#include <linux/mm.h>") != "de"


@pytest.mark.stack
def test_inflected_queries_find_their_messages(settings: Settings, tmp_path: Path) -> None:
    suites = load_suites(DATA / "suites.json", DEFAULT_CORPORA)
    with eval_namespace(settings, tmp_path) as ns:
        index_suites(ns, suites, tmp_path)
        results = judge_suite(Backends(ns, serves_vectors=False), suites[0]).results
    by_query = {r.spec.query: r for r in results}
    languages = {json.loads(line)["query"]: json.loads(line)["language"]
                 for line in (DATA / "queries.jsonl").read_text(encoding="utf-8").splitlines()}
    for q in ("Rechnungen", "Wohnungen Hamburg", "signé", "fatture", "reuniões",
              "vergaderingen", "möten", "встречи"):
        assert by_query[q].recall == 1.0, q  # none of these matched before v7
    for q in ("会議", "請求書", "会议", "发票", "invoices", "meetings"):
        assert by_query[q].recall == 1.0 and by_query[q].rr == 1.0, q  # as before
    for lang in ("de", "fr", "es", "it", "pt", "nl"):
        mine = [r.recall for r in results if languages[r.spec.query] == lang]
        assert sum(mine) / len(mine) >= 0.7, lang
    assert sum(r.recall for r in results) / len(results) >= 0.85


@pytest.mark.stack
def test_an_older_index_is_written_without_language_fields(settings: Settings) -> None:
    index = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    index.ensure(6)
    ref = MessageRef("box-ml", "k1")
    state = MessageState(ref, {"subject": "Rechnung für März", "ts": 1, "from_email": "a@b.c"},
                         {"clean": "Hallo Petra, anbei die Rechnung für die Beratung im März."})
    doc = search_document(state)
    assert doc is not None and doc["lang"] == "de" and doc["clean_de"]
    assert not index.apply({ref: doc})  # no rejection by the strict v6 mapping
    index.refresh()
    stored = index.client.get(index=index.index_name(6), id=point_id(ref), routing="box-ml")
    assert stored["_source"] == for_version(doc, 6) and "lang" not in stored["_source"]
    # the v7 query names the language fields; on v6 they are absent, and nothing fails
    body = fulltext_body("box-ml", parse("Rechnung"), size=10, by_date=False)
    assert any(f"clean_{c}" in json.dumps(body) for c in ANALYZERS)
    hits = fulltext(Backends(settings, serves_vectors=False), "box-ml", body)
    assert [h.message_key for h in hits] == ["k1"]


def _stored(settings: Settings, mailbox: str, n: int, subject: str, body: str) -> str:
    """One message stored in the table and indexed by the pipeline's sync; its key."""
    email = mail(n, subject, body, sender=("A", "a@b.example"), to=["c@d.example"])
    store_all(settings, mailbox, [email])
    key = to_items(email, mailbox).message_key
    sync_fulltext(factories.store(settings), factories.fulltext_index(settings),
                  [MessageRef(mailbox, key)], [])
    return key


@pytest.mark.stack
def test_a_search_asks_the_languages_of_its_own_mailbox_only(settings: Settings) -> None:
    """The API asks each mailbox which languages it holds (a count under the mailbox filter)
    and searches those languages' fields only: German mail in another mailbox changes
    neither what an English mailbox is asked nor its answers."""
    german, english = "de-box@example.org", "en-box@example.org"
    prepare_tables(settings)
    key = _stored(settings, german, 1, "Rechnung für März", "Anbei die Rechnung für die Beratung.")
    _stored(settings, english, 2, "Invoice for March", "Attached is the invoice for March.")
    factories.fulltext_index(settings).refresh()
    served = settings.model_copy(update={"api_tokens": json.dumps(
        {token_hash("ml-a"): [german], token_hash("ml-b"): [english]})})
    with TestClient(create_app(served, vectors=False)) as client:
        b = client.app.state.backends  # type: ignore[attr-defined]
        assert b.languages.of(german) == frozenset({"de"})
        assert b.languages.of(english) == frozenset()
        found = client.get(f"/v1/mailboxes/{german}/search", params={"q": "Rechnungen"},
                           headers={"Authorization": "Bearer ml-a"})
        assert found.status_code == 200, found.text
        assert [h["message_key"] for h in found.json()["hits"]] == [key]
        other = client.get(f"/v1/mailboxes/{english}/search", params={"q": "Rechnungen"},
                           headers={"Authorization": "Bearer ml-b"})
        assert other.status_code == 200 and other.json()["hits"] == []
    with in_languages(frozenset()):  # what the English mailbox's search is built with
        assert "clean_de" not in json.dumps(
            fulltext_body(english, parse("invoices march"), size=10, by_date=False))


@pytest.mark.stack
def test_sidecar_reindex_moves_a_v6_index_to_v7(settings: Settings, tmp_path: Path) -> None:
    """The way there: German mail indexed under v6 is found by an inflected word only after
    ``sidecar reindex --to-version 7`` (the CLI, real workers)."""
    prepare_tables(settings)
    index = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    index.ensure(6)
    box = "reindex-de@example.org"
    email = mail(1, "Rechnung für März", "Hallo Petra, anbei die Rechnung für die Beratung "
                 "im März. Bitte überweise den Betrag bis Ende des Monats.",
                 sender=("Jonas", "jonas@beispiel.example"), to=["petra@beispiel.example"])
    store_all(settings, box, [email])
    key = to_items(email, box).message_key

    def found(q: str) -> list[str]:
        index.refresh()
        body = fulltext_body(box, parse(q), size=10, by_date=False)
        return [h.message_key for h in fulltext(Backends(settings, serves_vectors=False),
                                                 box, body)]

    with workers(settings, ("fulltext",)):
        assert ingest_fulltext(settings, tmp_path) == 0
        assert found("Rechnung") == [key] and found("Rechnungen") == []  # v6: English only
        cli = subprocess.run(
            [sys.executable, "-m", "indexer.cli.main", "reindex", "--to-version", "7"],
            env={**os.environ, **to_env(settings)}, capture_output=True, text=True, timeout=600)
        assert cli.returncode == 0, cli.stdout + cli.stderr
    assert index.aliases()[index.alias] == [index.index_name(7)]
    assert found("Rechnungen") == [key] and found("Rechnung") == [key]
