"""Ranking knows only the caller's mailbox (issue 23, part 2).

Every mailbox shares one index, and BM25's idf and average length were counted over every
document of the shard: indexing another mailbox moved the order of this one's hits, and a
tenant who mailed himself notes read other mailboxes' word counts off that order (a ladder
of 7 queries per word). Here mailbox X's answers — order, thread representatives, scores
shown and cursors, every mode and sort — are recorded, a second mailbox with very different
word counts and lengths is indexed beside it, and every answer must be the same. Identical
answers carry no information about the other mailbox: the ladder recovers nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import CORPORA, namespaced
from tests.support.api_fixtures import Api, mail, start_api
from tests.support.mail_helpers import corpus
from tests.support.tenant_load import load_mailbox

pytestmark = [pytest.mark.stack, pytest.mark.slow]

QUERIES = [
    "cache", "release", "patch", "kernel", "driver", "memory", "clock", "irq", "build",
    "cache flush", "kernel panic", "dma release", "from:ralf* cache", "subject:mips* fix",
    "fix OR bug", "\"device tree\"", "interrupt controller",
]
SHAPES: list[dict[str, Any]] = [
    {"mode": "fulltext"},
    {"mode": "fulltext", "collapse": "thread"},
    {"mode": "fulltext", "sort": "date"},
    {"mode": "hybrid"},
]
ALICE = ("Alice", "alice@example.com")


def skewed_mail(n: int) -> dict[str, Any]:
    """Short notes full of some query words, long ones of others: other idf, other lengths."""
    words = ["cache"] * 5 + ["kernel"] * (n % 7) + ["release", "irq"] * (n % 3)
    if n % 4 == 0:
        words += ["padding"] * 2000 + ["driver", "memory", "clock"]
    return mail(90_000 + n, f"note {n} cache fix", " ".join(words), sender=ALICE, to=["x@y.z"])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("tenant-rank")
    settings = namespaced("rank", tmp, unique)
    yield from start_api(settings, tmp, f"x-{unique}", f"y-{unique}")


def answers(api: Api) -> dict[str, Any]:
    """Every query in every shape, with its second page (through the cursor)."""
    found: dict[str, Any] = {}
    for q in QUERIES:
        for shape in SHAPES:
            pages = []
            response = api.search(q, limit=7, **shape)
            assert response.status_code == 200, (q, shape, response.text)
            pages.append(response.json())
            if pages[0]["next_cursor"]:
                nxt = api.search(q, limit=7, cursor=pages[0]["next_cursor"], **shape)
                assert nxt.status_code == 200, nxt.text
                pages.append(nxt.json())
            found[f"{q} {shape}"] = pages
    return found


def test_another_mailbox_changes_no_answer(api: Api) -> None:
    emails = corpus(CORPORA / "linux-mips-4k.jsonl.gz")
    load_mailbox(api.settings, api.mailbox_a, emails[:300])
    before = answers(api)
    assert sum(len(p[0]["hits"]) > 1 for p in before.values()) > len(before) // 2
    load_mailbox(api.settings, api.mailbox_b, emails[300:1500])
    load_mailbox(api.settings, api.mailbox_b, [skewed_mail(n) for n in range(400)])
    after = answers(api)
    changed = [key for key in before if before[key] != after[key]]
    assert not changed, f"{len(changed)} of {len(before)} answers changed, e.g. {changed[:5]}"
