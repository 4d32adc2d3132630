"""Who may read which mailbox: hashed opaque bearer tokens, and OIDC/JWT bearer tokens.

Opaque tokens: only SHA-256 hashes are configured and compared (in constant time), so neither
the configuration nor a log line ever holds a usable token. JWTs (an OIDC issuer such as
Cognito): verified against the issuer's JWKS (a URL or a file), its issuer, audience and
expiry, with public-key algorithms only, so neither ``alg: none`` nor an HMAC "signed" with
the public key can pass; the mailboxes come from one claim.

The audience is ``aud`` (an OIDC ID token), or — for a token without ``aud`` whose
``token_use`` is ``access`` — ``client_id``: that is how Cognito's access tokens name the app
client they were issued to. ``exp`` (and ``iat``/``nbf`` when present) must be JSON numbers:
PyJWT alone takes ``"exp": "9999999999"`` as a number. A token may live at most
``SIDECAR_API_JWT_MAX_LIFETIME_S`` (``exp - iat``, and ``exp`` from now), so a token minted
with an absurd expiry (``1e20``: never expires) by a misconfigured or compromised issuer
client is refused rather than honoured for ever. Authorisation never looks at
whether a mailbox exists: 403 for a mailbox outside the caller's set is the same answer
either way. No token, valid or not, is ever logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Protocol

import jwt
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from jwt import PyJWK, PyJWKClient, PyJWKSet
from jwt.exceptions import PyJWKClientConnectionError, PyJWKClientError, PyJWKSetError

from indexer.settings import Settings

log = logging.getLogger(__name__)

DEV_TOKEN = "sidecar-dev-token"  # noqa: S105 - documented; honoured only when SIDECAR_ENV=dev
JWKS_TIMEOUT_S = 5.0  # a request waits at most this long for the issuer's keys
_REJECTED = "JWT bearer token rejected: %s"  # the reason only, never the token


class TokenConfigError(ValueError):
    """The token configuration is not a JSON object of hex digest -> list of mailbox ids, or
    the JWT settings are incomplete."""


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
    """Who may read what, by opaque token."""

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


class SigningKeys(Protocol):
    """Where a JWT's key comes from, by ``kid`` (PyJWKClient's own interface)."""

    def get_signing_key(self, kid: str) -> PyJWK: ...


class JwksFile:
    """A JWKS file, used like :class:`PyJWKClient` uses a URL: re-read after ``lifespan_s``,
    and on an unknown ``kid`` at most once per ``cooldown_s`` — so keys rotate by replacing
    the file, without a restart. Read at construction: a missing or broken file stops the
    API at start rather than at its first request."""

    def __init__(self, path: Path, lifespan_s: float, cooldown_s: float) -> None:
        self._path, self._lifespan, self._cooldown = path, lifespan_s, cooldown_s
        self._lock = threading.Lock()
        self._keys, self._read_at = self._read(), time.monotonic()

    def _read(self) -> PyJWKSet:
        try:
            return PyJWKSet.from_json(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError, AttributeError, PyJWKSetError) as exc:  # not a JWKS
            raise PyJWKClientConnectionError(f"cannot read the JWKS file: {exc}") from exc

    def get_signing_key(self, kid: str) -> PyJWK:
        with self._lock:
            age = time.monotonic() - self._read_at
            if age >= self._lifespan or (_find(self._keys, kid) is None and age >= self._cooldown):
                self._keys, self._read_at = self._read(), time.monotonic()
            found = _find(self._keys, kid)
        if found is None:
            raise PyJWKClientError("no signing key matches the token's kid")
        return found


def _find(keys: PyJWKSet, kid: str) -> PyJWK | None:
    return next(
        (k for k in keys if k.key_id == kid and k.public_key_use in ("sig", None)), None
    )


class JwtVerifier:
    """OIDC/JWT bearer tokens: signature by the issuer's key named by ``kid``, ``iss``, the
    audience (``aud``, or a Cognito access token's ``client_id``) and a numeric ``exp`` at most
    ``max_lifetime_s`` away all required, clock skew ``leeway_s``."""

    def __init__(
        self,
        keys: SigningKeys,
        *,
        issuer: str,
        audience: str,
        algorithms: tuple[str, ...],
        claim: str,
        leeway_s: float,
        max_lifetime_s: float = 86_400,
    ) -> None:
        self._keys, self._issuer, self._audience = keys, issuer, audience
        self._algorithms, self._claim, self._leeway = list(algorithms), claim, leeway_s
        self._max_lifetime = max_lifetime_s

    @classmethod
    def from_settings(cls, settings: Settings) -> JwtVerifier | None:
        """None without a JWKS: JWTs are then unknown tokens like any other."""
        url, path = settings.api_jwt_jwks_url, settings.api_jwt_jwks_file
        if url is None and path is None:
            return None
        if url is not None and path is not None:
            raise TokenConfigError("set SIDECAR_API_JWT_JWKS_URL or _JWKS_FILE, not both")
        if not settings.api_jwt_issuer or not settings.api_jwt_audience:
            raise TokenConfigError("JWT bearer tokens need SIDECAR_API_JWT_ISSUER and _AUDIENCE")
        lifespan, cooldown = settings.api_jwt_jwks_lifespan_s, settings.api_jwt_jwks_cooldown_s
        keys: SigningKeys
        if url is not None:
            try:
                keys = PyJWKClient(
                    url, lifespan=lifespan, cooldown_duration=cooldown, timeout=JWKS_TIMEOUT_S
                )
            except PyJWKClientError as exc:  # e.g. a scheme other than http(s)
                raise TokenConfigError(f"SIDECAR_API_JWT_JWKS_URL: {exc}") from exc
        else:
            assert path is not None
            try:
                keys = JwksFile(path, lifespan, cooldown)
            except PyJWKClientError as exc:
                raise TokenConfigError(f"SIDECAR_API_JWT_JWKS_FILE: {exc}") from exc
        return cls(
            keys,
            issuer=settings.api_jwt_issuer,
            audience=settings.api_jwt_audience,
            algorithms=settings.api_jwt_algorithms,
            claim=settings.api_jwt_mailboxes_claim,
            leeway_s=settings.api_jwt_leeway_s,
            max_lifetime_s=settings.api_jwt_max_lifetime_s,
        )

    def mailboxes(self, token: str) -> frozenset[str] | None:
        """The claim's mailboxes of a valid token (maybe none), None for an invalid one.
        Raises 503 when the issuer's keys cannot be had: the token may well be valid."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self._algorithms or not isinstance(kid, str):
            log.info(_REJECTED, "algorithm not allowed or no kid")
            return None
        try:
            key = self._keys.get_signing_key(kid)
        except PyJWKClientConnectionError as exc:
            log.warning("the JWKS could not be loaded: %s", exc)
            raise HTTPException(503, "jwks is unavailable", {"Retry-After": "5"}) from exc
        except (PyJWKClientError, PyJWKSetError):
            log.info(_REJECTED, "unknown kid")
            return None
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                issuer=self._issuer,
                leeway=self._leeway,
                # The audience is checked below: aud, or a Cognito access token's client_id.
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except (jwt.PyJWTError, ValueError, OverflowError) as exc:  # Infinity parses as JSON
            log.info(_REJECTED, type(exc).__name__)
            return None
        problem = self._audience_problem(claims) or self._lifetime_problem(claims)
        if problem is not None:
            log.info(_REJECTED, problem)
            return None
        return _granted(claims.get(self._claim))

    def _audience_problem(self, claims: Mapping[str, Any]) -> str | None:
        """Why the token is not for this API, or None. ``aud`` decides when present (a string
        or a list); without it only a Cognito access token (``token_use: access``) may name
        the app client in ``client_id`` — an ID token or anything else without ``aud`` is
        refused, as PyJWT's own check would."""
        if "aud" in claims:
            aud = claims["aud"]
            named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            return None if self._audience in named else "wrong audience"
        if claims.get("token_use") != "access":
            return "no audience"
        client = claims.get("client_id")
        if not isinstance(client, str) or not hmac.compare_digest(client, self._audience):
            return "wrong client_id"
        return None

    def _lifetime_problem(self, claims: Mapping[str, Any]) -> str | None:
        """Why the token's times are unacceptable, or None: every time claim a finite JSON
        number, and ``exp`` no further than the maximum lifetime from ``iat`` or from now."""
        for name in ("exp", "iat", "nbf"):
            value = claims.get(name, 0)
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value)):
                return f"{name} is not a number"
        exp, horizon = float(claims["exp"]), self._max_lifetime + self._leeway
        if exp - time.time() > horizon:
            return "expires beyond the maximum token lifetime"
        if "iat" in claims and exp - float(claims["iat"]) > horizon:
            return "lifetime longer than the maximum"
        return None


def _granted(value: Any) -> frozenset[str]:
    """A list claim's strings, or one string as one mailbox; anything else grants nothing."""
    if isinstance(value, str):
        return frozenset([value])
    if isinstance(value, list):
        return frozenset(v for v in value if isinstance(v, str))
    return frozenset()


class Authenticator:
    """The token table first (a cheap hash), then — for what looks like a JWT — the issuer."""

    def __init__(self, table: TokenTable, verifier: JwtVerifier | None = None) -> None:
        self._table, self._verifier = table, verifier

    @classmethod
    def from_settings(cls, settings: Settings) -> Authenticator:
        return cls(TokenTable.from_settings(settings), JwtVerifier.from_settings(settings))

    def mailboxes(self, token: str) -> frozenset[str] | None:
        found = self._table.mailboxes(token)
        if found is None and self._verifier is not None and token.count(".") == 2:
            found = self._verifier.mailboxes(token)
        return found


bearer = HTTPBearer(
    auto_error=False,  # a missing token is our 401 (with WWW-Authenticate), not FastAPI's 403
    scheme_name="bearer",
    description="An opaque token of SIDECAR_API_TOKENS, or a JWT of the configured issuer.",
)


def authorized_mailbox(
    mailbox_id: str,
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """401 without a valid bearer token; 403 for a mailbox outside its set (exists or not)."""
    authenticator: Authenticator = request.app.state.tokens
    allowed = authenticator.mailboxes(credentials.credentials) if credentials else None
    if allowed is None:
        raise HTTPException(401, "missing or invalid bearer token", {"WWW-Authenticate": "Bearer"})
    if mailbox_id not in allowed:
        raise HTTPException(403, "this token may not read that mailbox")
    return mailbox_id
