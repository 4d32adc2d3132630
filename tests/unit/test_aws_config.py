"""Region, endpoints and credentials are found the way AWS users expect (no service needed:
building a botocore client makes no call)."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexer.adapters.aws import clients as aws
from indexer.settings import Settings

AWS_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "SIDECAR_AWS_REGION",
            "SIDECAR_AWS_ENDPOINT_URL", "SIDECAR_DYNAMODB_ENDPOINT_URL",
            "SIDECAR_DYNAMODBSTREAMS_ENDPOINT_URL", "SIDECAR_S3_ENDPOINT_URL")


@pytest.fixture(autouse=True)
def clean_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ambient AWS configuration: no profile files, no instance metadata."""
    for name in AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_aws_region_gives_clients_in_that_region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    settings = Settings()
    assert settings.aws_region is None
    for service in aws.SERVICES:
        assert aws.client(settings, service).meta.region_name == "eu-west-1"
    assert aws.region(settings) == "eu-west-1"


def test_sidecar_region_wins_then_aws_region_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert aws.client(Settings(), "dynamodb").meta.region_name == "ap-south-1"
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert aws.client(Settings(), "dynamodb").meta.region_name == "eu-west-1"
    monkeypatch.setenv("SIDECAR_AWS_REGION", "us-west-2")
    assert aws.client(Settings(), "dynamodb").meta.region_name == "us-west-2"


def test_profile_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config").write_text("[profile mail]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_PROFILE", "mail")
    assert aws.client(Settings(), "dynamodbstreams").meta.region_name == "sa-east-1"


def test_no_region_for_real_aws_is_a_clear_error() -> None:
    with pytest.raises(aws.AwsConfigError, match="SIDECAR_AWS_REGION or AWS_REGION"):
        aws.client(Settings(), "dynamodb")


def test_emulator_defaults_to_us_east_1_with_placeholder_credentials() -> None:
    settings = Settings(aws_endpoint_url="http://127.0.0.1:5000")
    built = aws.client(settings, "dynamodb")
    assert built.meta.region_name == "us-east-1"
    assert built._request_signer._credentials.access_key == "testing"


def test_per_service_endpoints_beside_the_local_one() -> None:
    settings = Settings(
        aws_region="eu-central-1",
        aws_endpoint_url="http://127.0.0.1:5000",
        dynamodb_endpoint_url="https://vpce-1.dynamodb.eu-central-1.vpce.amazonaws.com",
        s3_endpoint_url="https://bucket.vpce-2.s3.eu-central-1.vpce.amazonaws.com",
    )
    assert aws.endpoint(settings, "dynamodb") == settings.dynamodb_endpoint_url
    assert aws.endpoint(settings, "s3") == settings.s3_endpoint_url
    assert aws.endpoint(settings, "dynamodbstreams") == "http://127.0.0.1:5000"
    assert aws.client(settings, "dynamodb").meta.endpoint_url == settings.dynamodb_endpoint_url
    assert aws.endpoint(Settings(), "s3") is None


@pytest.mark.parametrize("url", [
    "http://dynamodb:5000", "https://dynamodb.eu-west-1.amazonaws.com", "http://10.0.0.5:8000"])
def test_placeholder_credentials_never_for_a_non_loopback_endpoint(url: str) -> None:
    built = aws.client(Settings(aws_region="eu-west-1", aws_endpoint_url=url), "dynamodb")
    assert built._request_signer._credentials is None  # boto3's chain found nothing: no fakes


def test_a_mixed_configuration_gets_no_placeholder_credentials() -> None:
    """One real endpoint among loopback ones: the real one must never see fake keys."""
    settings = Settings(aws_endpoint_url="http://127.0.0.1:5000", aws_region="eu-west-1",
                        s3_endpoint_url="https://s3.eu-west-1.amazonaws.com")
    assert aws.client(settings, "dynamodb")._request_signer._credentials is None


@pytest.mark.parametrize(("url", "loopback"), [
    ("http://127.0.0.1:5000", True), ("http://localhost:5000", True), ("http://[::1]:5000", True),
    ("http://127.8.0.1", True), ("http://dynamodb:5000", False), ("https://x.amazonaws.com", False),
    (None, False)])
def test_is_loopback(url: str | None, loopback: bool) -> None:
    assert aws.is_loopback(url) is loopback
