"""OpenSearch authentication and TLS options built from settings (no service needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from opensearchpy import Urllib3AWSV4SignerAuth

from indexer.adapters.opensearch.auth import OpenSearchConfigError, client_options
from indexer.settings import Settings, to_env


def test_default_is_no_auth_with_certificates_verified() -> None:
    options = client_options(Settings())
    assert options["verify_certs"] is True and "http_auth" not in options


def test_basic_auth_and_the_password_is_never_shown() -> None:
    settings = Settings(opensearch_auth="basic", opensearch_username="sidecar",
                        opensearch_password="s3cr3t-pw")  # type: ignore[arg-type]
    assert client_options(settings)["http_auth"] == ("sidecar", "s3cr3t-pw")
    assert "s3cr3t-pw" not in repr(settings) and "s3cr3t-pw" not in str(settings.model_dump())
    assert to_env(settings)["SIDECAR_OPENSEARCH_PASSWORD"] == "s3cr3t-pw"  # child processes


def test_basic_auth_without_a_password_is_a_clear_error() -> None:
    with pytest.raises(OpenSearchConfigError, match="SIDECAR_OPENSEARCH_PASSWORD"):
        client_options(Settings(opensearch_auth="basic", opensearch_username="u"))


def test_ca_bundle(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    assert client_options(Settings(opensearch_ca_certs=bundle))["ca_certs"] == str(bundle)
    with pytest.raises(OpenSearchConfigError, match="no such file"):
        client_options(Settings(opensearch_ca_certs=tmp_path / "missing.pem"))


def test_sigv4_signs_for_the_domain_in_the_resolved_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    auth = client_options(Settings(opensearch_auth="sigv4"))["http_auth"]
    assert isinstance(auth, Urllib3AWSV4SignerAuth)
    assert (auth.signer.region, auth.signer.service) == ("eu-west-1", "es")


def test_sigv4_without_credentials_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE",
                 "SIDECAR_AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(OpenSearchConfigError, match="no AWS credentials"):
        client_options(Settings(opensearch_auth="sigv4", aws_region="eu-west-1"))
