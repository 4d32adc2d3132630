"""An OIDC issuer in miniature for the API's JWT tests: keys generated with ``cryptography``,
tokens signed by the test, and a JWKS served by ``http.server`` on a thread (counting its
fetches, so rate-limited refetching can be checked), or written to a file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER, AUDIENCE = "https://issuer.test/pool", "mail-search"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass
class Key:
    kid: str
    private: PrivateKey

    @property
    def alg(self) -> str:
        return "RS256" if isinstance(self.private, rsa.RSAPrivateKey) else "ES256"

    def jwk(self) -> dict[str, Any]:
        key = self.private.public_key()
        text = RSAAlgorithm.to_jwk(key) if isinstance(key, rsa.RSAPublicKey) else (
            ECAlgorithm.to_jwk(key)
        )
        public: dict[str, Any] = json.loads(text)
        return public | {"kid": self.kid, "use": "sig", "alg": self.alg}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def rsa_key(kid: str) -> Key:
    return Key(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_key(kid: str) -> Key:
    return Key(kid, ec.generate_private_key(ec.SECP256R1()))


def claims(mailboxes: Any = None, *, expires_in: float = 300, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    body: dict[str, Any] = {
        "iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "iat": now, "exp": now + expires_in
    }
    if mailboxes is not None:
        body["mailboxes"] = mailboxes
    return body | overrides


def sign(key: Key, body: dict[str, Any], kid: str | None = None) -> str:
    return jwt.encode(body, key.private, algorithm=key.alg, headers={"kid": kid or key.kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(body: dict[str, Any], kid: str) -> str:
    """``alg: none``: a header and a payload, no signature."""
    header = {"alg": "none", "typ": "JWT", "kid": kid}
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}."


def hmac_with_public_key(key: Key, body: dict[str, Any]) -> str:
    """The classic confusion attack: HS256 keyed with the issuer's (public) PEM."""
    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}"
    mac = hmac.new(key.public_pem(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"


@dataclass
class Jwks:
    """The published key set; ``fetches`` counts GETs of it."""

    keys: list[Key] = field(default_factory=list)
    fetches: int = 0
    url: str = ""

    def document(self) -> bytes:
        return json.dumps({"keys": [k.jwk() for k in self.keys]}).encode()

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(self.document())
        tmp.replace(path)  # whole, like a deployment replacing the file


@contextmanager
def serve_jwks(jwks: Jwks) -> Iterator[Jwks]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            jwks.fetches += 1
            body = jwks.document()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    jwks.url = f"http://127.0.0.1:{server.server_address[1]}/.well-known/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield jwks
    finally:
        server.shutdown()
        server.server_close()
