"""How the sidecar reaches AWS: endpoints (a local emulator, a VPC endpoint), the region, an
assumed role, and the call log. Every AWS client is built from this group.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr


class AwsSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    aws_endpoint_url: str | None = Field(
        default=None, description="moto locally; unset means real AWS."
    )
    aws_region: str | None = Field(
        default=None,
        description="Region; unset = AWS_REGION, else boto3's chain (AWS_DEFAULT_REGION, profile).",
    )
    dynamodb_endpoint_url: str | None = Field(
        default=None, description="DynamoDB endpoint (e.g. a VPC endpoint); else aws_endpoint_url."
    )
    dynamodbstreams_endpoint_url: str | None = Field(
        default=None, description="DynamoDB Streams endpoint; else aws_endpoint_url."
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (exports, ingest); else aws_endpoint_url."
    )
    aws_role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}$",
        description="A role to assume for every AWS call (DynamoDB, Streams, S3, OpenSearch "
        "SigV4), e.g. the mail store's account; the default chain's credentials assume it.",
    )
    aws_role_external_id: SecretStr | None = Field(
        default=None, description="The ExternalId the role's trust policy requires; secret."
    )
    aws_role_session_name: str = Field(
        default="mail-search-sidecar", pattern=r"^[A-Za-z0-9_+=,.@-]{2,64}$",
        description="RoleSessionName of the assumed role (shows in CloudTrail).",
    )
    aws_call_log: Path | None = Field(
        default=None,
        description="Append each distinct AWS call (role, service, operation) here (IAM audit).",
    )
