"""How the sidecar authenticates to OpenSearch: none, HTTP basic, or AWS SigV4.

- ``SIDECAR_OPENSEARCH_AUTH=none`` (default): the local node, or a domain behind a proxy.
- ``basic``: ``SIDECAR_OPENSEARCH_USERNAME`` / ``SIDECAR_OPENSEARCH_PASSWORD`` (a
  ``SecretStr``: never in a log line, ``repr`` or ``to_env`` dump shown to a user) — the
  security plugin's internal users, or an Amazon OpenSearch Service domain with fine-grained
  access control's master user.
- ``sigv4``: every request signed with AWS Signature V4 for ``SIDECAR_OPENSEARCH_AWS_SERVICE``
  (``es`` = an OpenSearch Service domain; ``aoss`` = Serverless, refused below) in the
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

# What the sidecar needs that OpenSearch Serverless collections do not offer (README,
# "Deploying on AWS"); one line, so a misconfigured process stops with a clear reason.
SERVERLESS_REFUSAL = (
    "SIDECAR_OPENSEARCH_AWS_SERVICE=aoss is not supported: OpenSearch Serverless collections "
    "reject the index settings of the sidecar's template (number_of_shards, "
    "number_of_replicas, refresh_interval) and offer no _refresh or _delete_by_query "
    "(purge, reconcile, reindex); use an OpenSearch Service domain (es)"
)


class OpenSearchConfigError(RuntimeError):
    """The OpenSearch settings cannot work; ``str()`` is one line saying what to set."""


def _signer(settings: Settings) -> Urllib3AWSV4SignerAuth:
    from indexer.adapters import aws

    session = aws.session(settings)
    credentials = session.get_credentials()
    if credentials is None:
        raise OpenSearchConfigError(
            "SIDECAR_OPENSEARCH_AUTH=sigv4 but boto3 found no AWS credentials "
            "(environment, profile, container or instance role)")
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
        if settings.opensearch_aws_service == "aoss":
            raise OpenSearchConfigError(SERVERLESS_REFUSAL)
        options["http_auth"] = _signer(settings)
    return options
