"""Bearer tokens, configured hashed, each allowed a set of mailbox ids.

Only SHA-256 hashes of tokens are configured and compared (in constant time), so neither the
configuration nor a log line ever holds a usable token. Authorisation never looks at whether
a mailbox exists: 403 for a mailbox outside the token's set is the same answer either way.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping

from indexer.settings import Settings

DEV_TOKEN = "sidecar-dev-token"  # noqa: S105 - documented; honoured only when SIDECAR_ENV=dev


class TokenConfigError(ValueError):
    """The token configuration is not a JSON object of hex digest -> list of mailbox ids."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _parse(raw: str) -> dict[str, frozenset[str]]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise TokenConfigError(f"API tokens are not JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise TokenConfigError("API tokens must be a JSON object")
    table: dict[str, frozenset[str]] = {}
    for digest, mailboxes in data.items():
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
            raise TokenConfigError("API token keys must be hex SHA-256 digests")
        if not isinstance(mailboxes, list) or not all(isinstance(m, str) for m in mailboxes):
            raise TokenConfigError("each API token maps to a list of mailbox ids")
        table[digest.lower()] = frozenset(mailboxes)
    return table


class TokenTable:
    """Who may read what."""

    def __init__(self, grants: Mapping[str, frozenset[str]]) -> None:
        self._grants = dict(grants)

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenTable:
        grants: dict[str, frozenset[str]] = {}
        if settings.api_tokens_file is not None:
            grants.update(_parse(settings.api_tokens_file.read_text(encoding="utf-8")))
        if settings.api_tokens:
            grants.update(_parse(settings.api_tokens))
        if settings.env == "dev":
            grants[token_hash(DEV_TOKEN)] = frozenset(settings.dev_mailboxes)
        return cls(grants)

    def mailboxes(self, token: str) -> frozenset[str] | None:
        """The mailboxes a token may read, or None for an unknown token."""
        digest = token_hash(token)
        for known, mailboxes in self._grants.items():
            if hmac.compare_digest(known, digest):
                return mailboxes
        return None
