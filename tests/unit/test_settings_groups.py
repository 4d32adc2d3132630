"""Settings by group (issue 41) kept every ``SIDECAR_*`` variable: the names read before the
split are read still, each by exactly one group (or by the tooling's own settings), and a
variable set in the environment reaches the field of its group."""

from __future__ import annotations

import pytest

from indexer.settings import GROUPS, Settings, group_of
from indexer.settings.api import ApiSettings
from indexer.settings.opensearch import OpenSearchSettings
from indexer.settings.pipeline import PipelineSettings
from indexer.settings.qdrant import QdrantSettings
from sidecar_tools.stack.settings import StackSettings

# Every field of Settings before the split (2026-12-04, 93 of them), in their order then.
BEFORE = ["table", "state_table", "aws_endpoint_url", "aws_region", "dynamodb_endpoint_url", "dynamodbstreams_endpoint_url", "s3_endpoint_url", "aws_role_arn", "aws_role_external_id", "aws_role_session_name", "aws_call_log", "opensearch_url", "opensearch_shards", "opensearch_replicas", "opensearch_wait_for_active_shards", "opensearch_refresh_interval", "opensearch_index", "opensearch_auth", "opensearch_aws_service", "opensearch_visible_timeout_s", "opensearch_username", "opensearch_password", "opensearch_verify_certs", "opensearch_ca_certs", "opensearch_pool_size", "search_timeout_ms", "api_expensive_per_token", "api_expensive_per_second", "api_expensive_in_flight", "api_requests_per_second", "redis_url", "redis_sentinel_master", "redis_sentinel_password", "qdrant_url", "qdrant_path", "qdrant_collection", "qdrant_shard_number", "qdrant_replication_factor", "qdrant_write_consistency_factor", "qdrant_read_consistency", "qdrant_api_key", "qdrant_prefer_grpc", "qdrant_grpc_port", "qdrant_optimize_after", "state_dir", "moto_port", "opensearch_heap", "queue_prefix", "batch_messages", "vectors_nice", "first_read", "max_retries", "retry_backoff_max_s", "transient_retry_budget_s", "visibility_timeout_s", "embed_batch_size", "embed_max_tokens", "embed_threads", "embed_dtype", "embed_device", "embed_runtime", "embed_precision", "embed_onnx_dir", "export_bucket", "export_prefix", "embed_model", "embed_models", "embed_recipe", "metrics_port", "metrics_host", "log_level", "progress_interval_s", "api_host", "api_port", "api_tokens", "api_tokens_file", "env", "dev_mailboxes", "api_metrics_port", "api_jwt_jwks_url", "api_jwt_jwks_file", "api_jwt_issuer", "api_jwt_audience", "api_jwt_mailboxes_claim", "api_jwt_algorithms", "api_jwt_leeway_s", "api_jwt_max_lifetime_s", "api_jwt_jwks_lifespan_s", "api_jwt_jwks_cooldown_s", "cursor_key", "expose_scores", "dlq_ttl_days", "console"]
LOCAL_STACK = {"state_dir", "moto_port", "opensearch_heap"}


def test_every_variable_of_before_the_split_is_still_read() -> None:
    assert len(BEFORE) == 93
    assert set(BEFORE) - set(StackSettings.model_fields) == set()
    assert set(BEFORE) - set(Settings.model_fields) == LOCAL_STACK  # the tooling's now


def test_each_runtime_field_has_exactly_one_group() -> None:
    for name in Settings.model_fields:
        owners = [g for g in GROUPS if name in g.model_fields]  # type: ignore[attr-defined]
        assert owners == [group_of(name)], name


@pytest.mark.parametrize(("variable", "value", "group", "field", "expected"), [
    ("SIDECAR_OPENSEARCH_URL", "http://a:1,http://b:2", OpenSearchSettings, "opensearch_hosts",
     ["http://a:1", "http://b:2"]),
    ("SIDECAR_QDRANT_URL", "http://q:6333", QdrantSettings, "qdrant_embedded", False),
    ("SIDECAR_QUEUE_PREFIX", "blue", PipelineSettings, "fulltext_queue", "blue.fulltext"),
    ("SIDECAR_API_JWT_LEEWAY_S", "7", ApiSettings, "api_jwt_leeway_s", 7),
    ("SIDECAR_STATE_DIR", "/tmp/x", None, "state_dir", None),
])
def test_a_variable_reaches_its_group(monkeypatch: pytest.MonkeyPatch, variable: str,
                                      value: str, group: type | None, field: str,
                                      expected: object) -> None:
    monkeypatch.setenv(variable, value)
    if group is None:  # the tooling's own knob: Settings ignores it, StackSettings reads it
        assert str(StackSettings().state_dir) == value
        assert "state_dir" not in Settings.model_fields
        return
    settings = Settings()
    assert isinstance(settings, group)
    assert getattr(settings, field) == expected


def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from indexer.settings import invalid_settings

    monkeypatch.setenv("SIDECAR_BATCH_MESSAGES", "abc")
    with pytest.raises(ValidationError) as failure:
        Settings()
    assert invalid_settings(failure.value) == (
        "invalid setting SIDECAR_BATCH_MESSAGES: Input should be a valid integer, unable to "
        "parse string as an integer")
