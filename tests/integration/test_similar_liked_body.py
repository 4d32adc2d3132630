""""Similar emails" reads a liked message's first 2,000 body tokens where the index has the
analyzer for it (mapping version 5), and its whole body on an older index — on the real node.

A long liked message says one thing in its opening (``kestrel harbour``) and another after
2,000 tokens of filler (``zeppelin quasar``): on version 5 only the message sharing its opening
is similar; on version 4, which lacks the analyzer, the API finds it lacking and both are.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.backends import Backends
from search_api.query.more_like_this import LIKED_BODY_ANALYZER
from search_api.similar import by_terms

pytestmark = pytest.mark.stack

BOX = "liked@example.com"
FILLER = " ".join(["lorem"] * 2_100)  # past the analyzer's 2,000 tokens
BODIES = {
    "liked": f"kestrel harbour kestrel harbour kestrel {FILLER} zeppelin quasar zeppelin quasar",
    "opening": "a kestrel over the harbour, and another kestrel",
    "ending": "the zeppelin passed the quasar; a zeppelin again",
    "neither": "nothing in common with the others",
}


def _load(settings: Settings, version: int) -> OpenSearchIndex:
    index = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    index.ensure(version)
    docs = {
        MessageRef(BOX, key): {"mailbox_id": BOX, "message_key": key, "thread_key": f"t-{key}",
                               "subject": f"subject{n}", "clean": body, "ts": 1_700_000_000 + n}
        for n, (key, body) in enumerate(BODIES.items())
    }
    assert index.apply(docs) == {}
    index.refresh()
    return index


@pytest.fixture
def backends(settings: Settings) -> Iterator[Backends]:
    made = Backends(settings, serves_vectors=False)
    yield made
    made.close()


def _similar(backends: Backends) -> set[str]:
    ref = MessageRef(BOX, "liked")
    found = by_terms(backends, ref, None, size=10, liked_analyzer=backends.mapping.liked_body_analyzer())
    return {c.message_key for c in found}


def test_the_current_mapping_compares_a_liked_body_s_opening(
    settings: Settings, backends: Backends
) -> None:
    assert MAPPING_VERSION >= 5
    index = _load(settings, MAPPING_VERSION)
    assert index.has_analyzer(LIKED_BODY_ANALYZER)
    assert backends.mapping.liked_body_analyzer() == LIKED_BODY_ANALYZER
    assert _similar(backends) == {"opening"}
    # The same query without the analyzer reads the whole body: the ending matches too, so
    # the analyzer is what leaves it out.
    ref = MessageRef(BOX, "liked")
    whole = {c.message_key for c in by_terms(backends, ref, None, size=10)}
    assert whole == {"opening", "ending"}


def test_an_index_without_the_analyzer_is_read_whole(
    settings: Settings, backends: Backends
) -> None:
    index = _load(settings, 4)
    assert not index.has_analyzer(LIKED_BODY_ANALYZER)
    assert backends.mapping.liked_body_analyzer() is None
    assert _similar(backends) == {"opening", "ending"}


def test_no_index_yet_has_no_analyzer(settings: Settings) -> None:
    index = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    assert not index.has_analyzer(LIKED_BODY_ANALYZER)
