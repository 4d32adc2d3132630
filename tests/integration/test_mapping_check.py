"""The mapping check behind the ``/readyz`` warning and the ``sidecar_index_mapping_version``
gauge (issue 40 item 7), on the real OpenSearch node: an alias on an older mapping version
warns and the gauge shows live < code; on the code's version it is quiet; an index of another
name behind the alias is reported as unknown, not guessed. What /readyz would show is a fixed
sentence (it answers without a token): the alias's and indices' names are only in the log."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.settings import Settings
from search_api.mapping_check import MAPPING_CODES, check, mapping_warning, version_of

pytestmark = pytest.mark.stack


def _gauge(target: str) -> float | None:
    return REGISTRY.get_sample_value("sidecar_index_mapping_version", {"target": target})


def _aliased(settings: Settings, name: str) -> OpenSearchIndex:
    client = build_client(settings)
    client.indices.create(index=name, body={"aliases": {settings.opensearch_index: {}}})
    return OpenSearchIndex(client, settings.opensearch_index)


def test_an_older_live_index_warns_and_the_gauge_says_so(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    alias = settings.opensearch_index
    index = _aliased(settings, f"{alias}-v{MAPPING_VERSION - 1}")
    with caplog.at_level("WARNING", logger="search_api.mapping_check"):
        warning = mapping_warning(index)
        assert mapping_warning(index) == warning  # asked again: logged once
    assert warning == MAPPING_CODES["behind"] and alias not in warning
    logged = [r.getMessage() for r in caplog.records if r.name == "search_api.mapping_check"]
    assert len(logged) == 1, logged
    assert f"{alias}-v{MAPPING_VERSION - 1}" in logged[0]
    assert f"mapping v{MAPPING_VERSION - 1}" in logged[0] and "sidecar reindex" in logged[0]
    assert _gauge("live") == MAPPING_VERSION - 1 and _gauge("code") == MAPPING_VERSION
    # the reindex's end: the alias on the code's version -> no warning, live == code
    index.client.indices.create(index=f"{alias}-v{MAPPING_VERSION}")
    index.update_aliases([{"remove": {"index": f"{alias}-v{MAPPING_VERSION - 1}",
                                      "alias": alias}},
                          {"add": {"index": f"{alias}-v{MAPPING_VERSION}", "alias": alias}}])
    assert mapping_warning(index) is None
    assert _gauge("live") == MAPPING_VERSION


def test_an_index_of_another_name_is_unknown_not_guessed(settings: Settings) -> None:
    alias = settings.opensearch_index
    index = _aliased(settings, f"{alias}-restored")
    state = check(index)
    assert state.live == {f"{alias}-restored": None} and state.oldest is None
    assert state.code() == "unknown"
    detail = state.detail()
    assert detail is not None and "unknown" in detail and f"{alias}-restored" in detail
    assert mapping_warning(index) == MAPPING_CODES["unknown"]


def test_no_index_yet_is_no_warning(settings: Settings) -> None:
    index = OpenSearchIndex(build_client(settings), settings.opensearch_index)
    assert mapping_warning(index) is None  # readyz's own OpenSearch check reports it


def test_version_of_reads_only_sidecar_names() -> None:
    assert version_of("mail", "mail-v5") == 5
    assert version_of("mail", "mail-v12") == 12
    assert version_of("mail", "mail-x-v5") is None
    assert version_of("mail", "other-v5") is None
