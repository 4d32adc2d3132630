"""The search API: where it listens, who may call it (tokens, JWT/OIDC), what a caller may
cost (budgets and rates), and what it may be shown.

One group of :class:`indexer.settings.Settings` (its variables keep their ``SIDECAR_*``
names); a component that needs only this group takes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class ApiSettings(BaseModel):
    """The ``SIDECAR_*`` variables of this group."""

    search_timeout_ms: int = Field(
        default=2000, ge=100, le=60_000,
        description="Time budget of one search, enforced by OpenSearch (timeout, then task "
        "cancellation); a search over it answers 400 naming the budget, and is never retried.",
    )
    api_expensive_per_token: int = Field(
        default=1, ge=1, le=64,
        description="Expensive searches (>= 100 engine clauses: many prefixes or words) one "
        "caller may run at once; more answer 429 with Retry-After.",
    )
    api_expensive_per_second: float = Field(
        default=2.0, gt=0, le=1000,
        description="Expensive searches one caller may start per second on average (a burst "
        "of twice that); more answer 429 with Retry-After.",
    )
    api_expensive_in_flight: int = Field(
        default=4, ge=1, le=256,
        description="Expensive searches (every caller's together: many prefixes or words, "
        "collapse over many words, similar) one API process runs at once; more answer 429.",
    )
    api_requests_per_second: float = Field(
        default=100.0, gt=0, le=100_000,
        description="Requests one caller (its token, or a JWT's issuer and subject) may make "
        "per second on average to one API process (a burst of twice that); more answer 429.",
    )
    api_host: str = Field(
        default="127.0.0.1", description="Address `sidecar serve` listens on (`--host`)."
    )
    api_port: int = Field(default=8080, description="Port `sidecar serve` listens on (`--port`).")
    api_tokens: str | None = Field(
        default=None,
        description="JSON object: hex SHA-256 of a bearer token -> list of readable mailbox ids.",
    )
    api_tokens_file: Path | None = Field(default=None, description="A file holding that JSON.")
    env: str = Field(default="prod", description="'dev' enables the documented dev token.")
    dev_mailboxes: tuple[str, ...] = Field(
        default=("demo@example.com",), description="Mailboxes the dev token may read."
    )
    # Issue 23 part 6: ops endpoints apart from the public port, and OIDC/JWT bearer tokens.
    api_metrics_port: int = Field(
        default=9108, ge=0, le=65535,
        description="Port of the API's Prometheus /metrics, bound to the API's host; 0 = off. "
        "Never the API's own port, so a balancer forwarding /* to it cannot expose them.",
    )
    api_jwt_jwks_url: str | None = Field(
        default=None, description="JWKS URL of an OIDC issuer: enables JWT bearer tokens."
    )
    api_jwt_jwks_file: Path | None = Field(
        default=None, description="A JWKS file instead of a URL (re-read like a fetched set)."
    )
    api_jwt_issuer: str | None = Field(
        default=None, description="Required `iss` of JWT bearer tokens (required with a JWKS)."
    )
    api_jwt_audience: str | None = Field(
        default=None,
        description="The audience JWT bearer tokens must name (required with a JWKS): their "
        "`aud`, or for a Cognito access token (`token_use: access`, no `aud`) its `client_id` "
        "(the app client's id).",
    )
    api_jwt_mailboxes_claim: str = Field(
        default="mailboxes",
        description="Claim listing the mailbox ids a JWT may read (a list, or one string).",
    )
    api_jwt_algorithms: tuple[
        Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                "ES512", "EdDSA"], ...
    ] = Field(
        default=("RS256", "ES256"), min_length=1,
        description="Accepted JWT signature algorithms: public-key ones only (never none/HS*).",
    )
    api_jwt_leeway_s: int = Field(
        default=30, ge=0, le=600, description="Clock skew allowed on exp/nbf/iat, in seconds."
    )
    api_jwt_max_lifetime_s: int = Field(
        default=86_400, ge=60, le=31 * 86_400,
        description="Longest a JWT may live, in seconds: `exp - iat`, and `exp` from now, at "
        "most this (plus the leeway); `exp` must be a JSON number. A token minted to last "
        "for ever (`exp: 1e20`) is refused. Cognito's tokens last 1 day at most.",
    )
    api_jwt_jwks_lifespan_s: int = Field(
        default=3600, ge=1, description="Seconds a fetched JWKS is used before it is fetched again."
    )
    api_jwt_jwks_cooldown_s: int = Field(
        default=60, ge=0,
        description="Least seconds between two JWKS fetches forced by an unknown `kid` (key "
        "rotation) — a flood of made-up kids cannot turn into a flood of fetches.",
    )
    # Issue 16: hostile input and what the API and the dead-letter store keep.
    cursor_key: SecretStr | None = Field(
        default=None,
        description="HMAC key of page cursors, shared by every API replica; unset = random "
        "per process (cursors then work only on the replica that issued them).",
    )
    expose_scores: bool = Field(
        default=False,
        description="Return raw engine scores (single-tenant only); default: rank-derived.",
    )
    console: bool | None = Field(
        default=None,
        description="Serve the search console at /console; unset = only with env 'dev'.",
    )

    @property
    def console_enabled(self) -> bool:
        """``SIDECAR_CONSOLE`` decides when set; otherwise the console is a dev-only page."""
        return self.env == "dev" if self.console is None else self.console
