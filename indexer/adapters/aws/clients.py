"""boto3 clients built from settings, the way AWS users expect them to be found.

- **Region**: ``SIDECAR_AWS_REGION``, else ``AWS_REGION`` (what the AWS SDKs and Lambda set,
  which botocore itself ignores), else botocore's own chain (``AWS_DEFAULT_REGION``, the
  profile's ``region``). Only a loopback emulator falls back to ``us-east-1``; real AWS with
  no region is a clear error.
- **Endpoints**: ``SIDECAR_DYNAMODB_ENDPOINT_URL``, ``SIDECAR_DYNAMODBSTREAMS_ENDPOINT_URL``,
  ``SIDECAR_S3_ENDPOINT_URL`` (VPC endpoints differ per service), each falling back to
  ``SIDECAR_AWS_ENDPOINT_URL`` (one local emulator for all three); unset = AWS's own.
- **Credentials**: boto3's default chain (environment, profile, SSO, container/IRSA role,
  instance metadata), refreshed by botocore as they rotate. Placeholder credentials are
  used only for a loopback endpoint (moto) when the environment names none: a real AWS
  endpoint never receives them.
- **Cross-account**: ``SIDECAR_AWS_ROLE_ARN`` (with ``SIDECAR_AWS_ROLE_EXTERNAL_ID`` when
  its trust policy asks for one): those credentials assume the role through STS, and
  botocore's assume-role fetcher renews it before it expires (the same refreshable
  credentials the SDK builds for a profile's ``role_arn``). Every client and the OpenSearch
  signer then act as that role.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import urlsplit

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials

from indexer.adapters.aws import audit as aws_audit
from indexer.settings import Settings
from indexer.settings.aws import AwsSettings

SERVICES = ("dynamodb", "dynamodbstreams", "s3")
EMULATOR_REGION = "us-east-1"

_RETRIES = Config(
    retries={"max_attempts": 8, "mode": "adaptive"}, connect_timeout=5, read_timeout=30
)


class AwsConfigError(RuntimeError):
    """The AWS settings cannot work (no region for real AWS); ``str()`` says what to set."""


def is_loopback(url: str | None) -> bool:
    """True for ``localhost`` or a loopback address (127.0.0.0/8, ::1) — an emulator."""
    host = urlsplit(url).hostname if url else None
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint(settings: AwsSettings, service: str) -> str | None:
    """The service's endpoint override, else the shared local one, else None (AWS's own)."""
    specific: dict[str, str | None] = {
        "dynamodb": settings.dynamodb_endpoint_url,
        "dynamodbstreams": settings.dynamodbstreams_endpoint_url,
        "s3": settings.s3_endpoint_url,
    }
    if service not in specific:
        raise ValueError(f"unknown AWS service {service!r}; expected one of {SERVICES}")
    return specific[service] or settings.aws_endpoint_url


def _emulated(settings: AwsSettings) -> bool:
    """Every configured endpoint is a loopback emulator (and at least one is set)."""
    urls = [endpoint(settings, s) for s in SERVICES]
    return any(urls) and all(is_loopback(u) for u in urls if u)


def session(settings: AwsSettings) -> boto3.session.Session:
    """A boto3 session in the resolved region with the default credential chain (placeholder
    credentials for a loopback emulator when the environment gives none), acting as
    ``SIDECAR_AWS_ROLE_ARN`` when one is set."""
    base = _base_session(settings)
    if not settings.aws_role_arn:
        return base
    return _assumed(settings, base, settings.aws_role_arn)


def _assumed(
    settings: AwsSettings, base: boto3.session.Session, role_arn: str
) -> boto3.session.Session:
    extra: dict[str, Any] = {"RoleSessionName": settings.aws_role_session_name}
    if settings.aws_role_external_id is not None:
        extra["ExternalId"] = settings.aws_role_external_id.get_secret_value()
    sts_endpoint = settings.aws_endpoint_url if _emulated(settings) else None

    def create_client(service: str, **kwargs: Any) -> Any:
        return base.client(service, endpoint_url=sts_endpoint, **kwargs)

    source = base.get_credentials()
    if source is None:
        raise AwsConfigError(
            f"SIDECAR_AWS_ROLE_ARN={role_arn}: no credentials to assume it with "
            "(environment, profile, container or instance role)")
    fetcher = AssumeRoleCredentialFetcher(
        create_client, source, role_arn, extra_args=extra
    )
    assumed = botocore.session.Session()
    # botocore has no public setter for a session's credentials object; this is its seam.
    assumed._credentials = DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    return boto3.session.Session(botocore_session=assumed, region_name=base.region_name)


def _base_session(settings: AwsSettings) -> boto3.session.Session:
    region = settings.aws_region or os.environ.get("AWS_REGION") or None
    if _emulated(settings) and not os.environ.get("AWS_ACCESS_KEY_ID"):
        return boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - loopback emulator only
            region_name=region or EMULATOR_REGION,
        )
    found = boto3.session.Session(region_name=region)
    if found.region_name is None:
        if not _emulated(settings):
            raise AwsConfigError(
                "no AWS region: set SIDECAR_AWS_REGION or AWS_REGION (or the profile's region)")
        found = boto3.session.Session(region_name=EMULATOR_REGION)
    return found


def region(settings: AwsSettings) -> str:
    """The region the sidecar's clients (and the OpenSearch SigV4 signer) use."""
    return str(session(settings).region_name)


def client(settings: Settings, service: str) -> Any:
    """A low-level client for ``dynamodb``, ``dynamodbstreams`` or ``s3`` (the whole settings:
    the call audit names the tables)."""
    built = session(settings).client(
        service, endpoint_url=endpoint(settings, service), config=_RETRIES
    )
    if settings.aws_call_log is not None:
        aws_audit.record_calls(built, settings.aws_call_log, settings.table,
                               settings.resolved_state_table)
    return built
