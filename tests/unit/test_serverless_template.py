"""Serverless (``aoss``) without a service: the template keeps everything but the settings
collections refuse, and the client signs for ``aoss`` and says so to the index."""

from __future__ import annotations

import pytest

from indexer.adapters.opensearch.auth import ServerlessSigner, client_options
from indexer.adapters.opensearch.family import mapping_file
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.adapters.opensearch.serverless import REFUSED_SETTINGS, strip_settings
from indexer.settings import Settings


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_mapping_loses_only_the_refused_settings(version: int) -> None:
    template = mapping_file(version)["template"]
    stripped = strip_settings(template)
    assert set(template["settings"]) >= REFUSED_SETTINGS  # they were there
    assert not REFUSED_SETTINGS & set(stripped["settings"])
    kept = {k: v for k, v in template["settings"].items() if k not in REFUSED_SETTINGS}
    assert stripped["settings"] == kept and "analysis" in kept
    assert stripped["mappings"] == template["mappings"]
    assert "number_of_shards" in mapping_file(version)["template"]["settings"]  # not mutated


def test_v4_keeps_its_scripted_similarities() -> None:
    similarity = strip_settings(mapping_file(4)["template"])["settings"]["similarity"]
    assert {s["type"] for s in similarity.values()} == {"scripted"}


def test_every_spelling_of_a_refused_setting_goes() -> None:
    template = {"settings": {"index.number_of_shards": 2, "index.codec": "best_compression",
                             "index": {"refresh_interval": "5s", "max_result_window": 50},
                             "number_of_replicas": 1}}
    assert strip_settings(template) == {"settings": {
        "index.codec": "best_compression", "index": {"max_result_window": 50}}}
    assert strip_settings({"settings": {"index": {"number_of_shards": 1}}}) == {"settings": {}}


def test_aoss_signs_for_aoss_and_the_index_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    settings = Settings(opensearch_auth="sigv4", opensearch_aws_service="aoss",
                        aws_region="eu-west-1", opensearch_visible_timeout_s=12)
    auth = client_options(settings)["http_auth"]
    assert isinstance(auth, ServerlessSigner)
    assert (auth.signer.region, auth.signer.service, auth.visible_timeout_s) == (
        "eu-west-1", "aoss", 12)
    assert OpenSearchIndex(build_client(settings), "mail").serverless
    domain = settings.model_copy(update={"opensearch_aws_service": "es"})
    assert not OpenSearchIndex(build_client(domain), "mail").serverless
