"""How the sidecar authenticates to OpenSearch: none, HTTP basic, or AWS SigV4.

- ``SIDECAR_OPENSEARCH_AUTH=none`` (default): the local node, or a domain behind a proxy.
- ``basic``: ``SIDECAR_OPENSEARCH_USERNAME`` / ``SIDECAR_OPENSEARCH_PASSWORD`` (a
  ``SecretStr``: never in a log line, ``repr`` or ``to_env`` dump shown to a user) — the
  security plugin's internal users, or an Amazon OpenSearch Service domain with fine-grained
  access control's master user.
- ``sigv4``: every request signed with AWS Signature V4 for ``SIDECAR_OPENSEARCH_AWS_SERVICE``
  (``es`` = an OpenSearch Service domain; ``aoss`` = a Serverless collection, whose missing
  calls :mod:`.opensearch_serverless` works around) in the
  sidecar's region, with boto3's default credential chain (environment, profile, SSO,
  container/IRSA role, instance metadata). The signer asks the credentials object for a
  frozen copy on every request, so rotating role credentials are refreshed as they expire.

TLS: certificates are verified by default (``SIDECAR_OPENSEARCH_VERIFY_CERTS``), against
``SIDECAR_OPENSEARCH_CA_CERTS`` when given (a private CA), else certifi's bundle.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import Urllib3AWSV4SignerAuth

from indexer.settings import Settings


class ServerlessSigner(Urllib3AWSV4SignerAuth):
    """The ``aoss`` signer, carrying how long a ``refresh`` waits for writes to become
    searchable: :class:`~indexer.adapters.opensearch.index.OpenSearchIndex` reads its mode and that
    bound from the client's signer, so every place that builds one from a client follows it."""

    def __init__(self, credentials: Any, region: str, visible_timeout_s: float) -> None:
        super().__init__(credentials, region, "aoss")
        self.visible_timeout_s = visible_timeout_s


class OpenSearchConfigError(RuntimeError):
    """The OpenSearch settings cannot work; ``str()`` is one line saying what to set."""


def _signer(settings: Settings) -> Urllib3AWSV4SignerAuth:
    from indexer.adapters.aws import clients as aws

    session = aws.session(settings)
    credentials = session.get_credentials()
    if credentials is None:
        raise OpenSearchConfigError(
            "SIDECAR_OPENSEARCH_AUTH=sigv4 but boto3 found no AWS credentials "
            "(environment, profile, container or instance role)")
    if settings.opensearch_aws_service == "aoss":
        return ServerlessSigner(credentials, aws.region(settings),
                                settings.opensearch_visible_timeout_s)
    return Urllib3AWSV4SignerAuth(credentials, aws.region(settings),
                                  settings.opensearch_aws_service)


def client_options(settings: Settings) -> dict[str, Any]:
    """``OpenSearch(...)`` keyword arguments for authentication and TLS."""
    options: dict[str, Any] = {"verify_certs": settings.opensearch_verify_certs,
                               "ssl_show_warn": settings.opensearch_verify_certs}
    if settings.opensearch_ca_certs is not None:
        if not settings.opensearch_ca_certs.is_file():
            raise OpenSearchConfigError(
                f"SIDECAR_OPENSEARCH_CA_CERTS={settings.opensearch_ca_certs}: no such file")
        options["ca_certs"] = str(settings.opensearch_ca_certs)
    if settings.opensearch_auth == "basic":
        if not settings.opensearch_username or settings.opensearch_password is None:
            raise OpenSearchConfigError(
                "SIDECAR_OPENSEARCH_AUTH=basic needs SIDECAR_OPENSEARCH_USERNAME and "
                "SIDECAR_OPENSEARCH_PASSWORD")
        options["http_auth"] = (settings.opensearch_username,
                                settings.opensearch_password.get_secret_value())
    elif settings.opensearch_auth == "sigv4":
        options["http_auth"] = _signer(settings)
    return options
