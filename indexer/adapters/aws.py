"""boto3 clients built once from settings (moto when ``aws_endpoint_url`` is set)."""

from __future__ import annotations

import os
from typing import Any

import boto3
from botocore.config import Config

from indexer.settings import Settings

_RETRIES = Config(
    retries={"max_attempts": 8, "mode": "adaptive"}, connect_timeout=5, read_timeout=30
)


def _session(settings: Settings) -> boto3.session.Session:
    if settings.aws_endpoint_url and not os.environ.get("AWS_ACCESS_KEY_ID"):
        # moto accepts any credentials; real AWS never reaches this branch.
        return boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - emulator credentials
            region_name=settings.aws_region,
        )
    return boto3.session.Session(region_name=settings.aws_region)


def client(settings: Settings, service: str) -> Any:
    """A low-level client for ``dynamodb``, ``dynamodbstreams`` or ``s3``."""
    return _session(settings).client(
        service, endpoint_url=settings.aws_endpoint_url, config=_RETRIES
    )
