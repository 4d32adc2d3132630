"""Two deployments on one Redis with the same queue prefix (issue 16): each worker refuses
the other's tasks without touching an index, so nothing of either is lost or deleted."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.settings import Settings
from sidecar_tools.writer.store import delete_message
from tests.conftest import namespaced
from tests.support.api_fixtures import mail, store_all
from tests.support.pipeline_helpers import ingest_fulltext, opensearch_docs, prepare_tables, workers

pytestmark = [pytest.mark.stack, pytest.mark.slow]

SENDER = ("Alice", "alice@example.com")


def namespace(name: str, prefix: str, tmp: Path) -> Settings:
    return namespaced(
        f"dep-{name}",
        tmp,
        qdrant_path=tmp / name,
        queue_prefix=prefix,  # shared: both deployments consume the same queues
        batch_messages=1,  # one task per message: many chances to take the other's task
    )


def test_workers_of_two_deployments_on_one_queue_never_apply_each_others_tasks(
    tmp_path: Path,
) -> None:
    prefix = f"shared-{uuid.uuid4().hex[:8]}"
    one, two = namespace("one", prefix, tmp_path), namespace("two", prefix, tmp_path)
    shared = mail(1, "In both stores", "the same message", sender=SENDER, to=["b@x.org"])
    own = {
        one: [
            mail(n, f"One {n}", "first deployment", sender=SENDER, to=["b@x"]) for n in (2, 3, 4, 5)
        ],
        two: [
            mail(n, f"Two {n}", "second deployment", sender=SENDER, to=["b@x"])
            for n in (6, 7, 8, 9)
        ],
    }
    for settings in (one, two):
        prepare_tables(settings)
        factories.fulltext_index(settings).ensure()
        store_all(settings, "box", [shared, *own[settings]])
    with workers(one, ("fulltext",)), workers(two, ("fulltext",)):
        assert ingest_fulltext(one, tmp_path) == 0
        assert ingest_fulltext(two, tmp_path) == 0
        docs_one, docs_two = opensearch_docs(one, "box"), opensearch_docs(two, "box")
        assert {d["subject"] for d in docs_one.values()} == {"In both stores"} | {
            f"One {n}" for n in (2, 3, 4, 5)
        }
        assert {d["subject"] for d in docs_two.values()} == {"In both stores"} | {
            f"Two {n}" for n in (6, 7, 8, 9)
        }
        # A delete in deployment one: only its index loses the message.
        delete_message(aws.client(one, "dynamodb"), one.table, "box", "<msg1@example.org>")
        assert ingest_fulltext(one, tmp_path) == 0
        assert len(opensearch_docs(one, "box")) == 4
        assert len(opensearch_docs(two, "box")) == 5
    assert factories.dead_letters(one).list() == []
