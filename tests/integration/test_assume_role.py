"""Cross-account: every AWS call acts as ``SIDECAR_AWS_ROLE_ARN`` (issue 23 part 7), against
moto's STS and DynamoDB (the local stack's emulator)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from indexer.adapters.aws import clients as aws
from indexer.adapters.opensearch.auth import client_options
from indexer.settings import Settings

pytestmark = pytest.mark.stack

ROLE = "arn:aws:iam::123456789012:role/mail-store-reader"


def test_clients_act_as_the_assumed_role(settings: Settings) -> None:
    assumed = settings.model_copy(
        update={"aws_role_arn": ROLE, "aws_role_external_id": SecretStr("shared-secret")}
    )
    session = aws.session(assumed)
    identity = session.client("sts", endpoint_url=assumed.aws_endpoint_url).get_caller_identity()
    assert identity["Arn"].startswith(
        "arn:aws:sts::123456789012:assumed-role/mail-store-reader/mail-search-sidecar"
    ), identity
    frozen = session.get_credentials().get_frozen_credentials()
    assert frozen.access_key != "testing" and frozen.token  # STS's temporary credentials
    aws.client(assumed, "dynamodb").list_tables()  # the store's clients use them
    plain = aws.session(settings).client("sts", endpoint_url=settings.aws_endpoint_url)
    assert "assumed-role" not in plain.get_caller_identity()["Arn"]


def test_the_opensearch_signer_acts_as_the_role_too(settings: Settings) -> None:
    assumed = settings.model_copy(
        update={"aws_role_arn": ROLE, "opensearch_auth": "sigv4"}
    )
    signer = client_options(assumed)["http_auth"]
    assert signer.signer.credentials.get_frozen_credentials().access_key != "testing"


def test_a_malformed_role_arn_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="aws_role_arn"):
        Settings(aws_role_arn="mail-store-reader")
