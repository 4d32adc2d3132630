"""A verifying SigV4 proxy in front of the local OpenSearch node (test side only).

Amazon OpenSearch Service checks every request's AWS Signature V4 and answers 403 when it
does not match. This proxy does the same from what it actually *received* — method, path,
query string, the headers named in ``SignedHeaders``, and the body (whose SHA-256 must equal
``X-Amz-Content-SHA256`` when that header is sent) — recomputing the signature with botocore
from known test credentials, then forwards good requests to the real node unchanged. So a
request the client signed differently from what it sent (a re-encoded query, a body changed
after signing, an unsigned call) fails here as it would on AWS.

:meth:`SigV4Proxy.revoke` rotates the secret the proxy expects (as when a domain's access
policy or the IAM key is changed under a running deployment): every request then gets AWS's
403 for a bad signature until :meth:`SigV4Proxy.restore`.

``gate``: an optional rule run on every correctly signed request before it is forwarded; an
answer ``(status, body)`` is sent instead of the node's (how ``tests/integration/
test_opensearch_serverless.py`` makes the proxy answer as a Serverless collection does for
the calls collections lack).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class Expected:
    """What a valid request must be signed with."""

    access_key: str
    secret_key: str
    region: str
    service: str = "es"


@dataclass
class Tally:
    accepted: int = 0
    rejected: list[str] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    gated: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def verify(expected: Expected, method: str, target: str, headers: dict[str, str],
           body: bytes, host: str) -> str | None:
    """``None`` when the request carries a valid signature, else why not."""
    match = _AUTH.match(headers.get("authorization", ""))
    if match is None:
        return "missing or malformed SigV4 Authorization header"
    if match["key"] != expected.access_key:
        return f"unknown access key {match['key']}"
    if (match["region"], match["service"]) != (expected.region, expected.service):
        return f"wrong scope {match['region']}/{match['service']}"
    stamp = headers.get("x-amz-date", "")
    try:
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "missing or malformed X-Amz-Date"
    if abs(datetime.now(UTC) - when) > timedelta(minutes=5) or stamp[:8] != match["date"]:
        return "request time outside the 5-minute window"
    claimed = headers.get("x-amz-content-sha256")
    if claimed is not None and claimed != hashlib.sha256(body).hexdigest():
        return "X-Amz-Content-SHA256 does not match the body"
    signed = match["signed"].split(";")
    if "host" not in signed:
        return "Host is not signed"
    request = AWSRequest(method=method, url=f"http://{host}{target}", data=body,
                         headers={name: headers[name] for name in signed if name in headers})
    request.context["timestamp"] = stamp
    auth = SigV4Auth(Credentials(expected.access_key, expected.secret_key),
                     expected.service, expected.region)
    canonical = auth.canonical_request(request)
    if auth.signed_headers(auth.headers_to_sign(request)) != match["signed"]:
        return "SignedHeaders names a header that was not sent"
    want = auth.signature(auth.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(want, match["signature"]):
        return "signature mismatch"
    return None


Gate = Callable[[str, str, bytes], "tuple[int, bytes] | None"]


class SigV4Proxy:
    """``with SigV4Proxy(upstream, expected) as proxy:`` → ``proxy.url`` to point clients at."""

    def __init__(self, upstream: str, expected: Expected, gate: Gate | None = None) -> None:
        self.upstream = urlsplit(upstream)
        self.gate = gate
        self.expected = expected
        self._kept = expected
        self.tally = Tally()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> SigV4Proxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def revoke(self) -> None:
        """From now on expect another secret: the clients' signatures stop matching."""
        with self.tally.lock:
            self.expected = Expected(self.expected.access_key, "revoked-" + uuid.uuid4().hex,
                                     self.expected.region, self.expected.service)

    def restore(self) -> None:
        """Expect the clients' secret again (the operator's fix)."""
        with self.tally.lock:
            self.expected = self._kept

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: Any) -> None:
                return

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                host = headers.get("host", "")
                with proxy.tally.lock:
                    expected = proxy.expected
                problem = verify(expected, self.command, self.path, headers, body, host)
                with proxy.tally.lock:
                    if problem:
                        proxy.tally.rejected.append(f"{self.command} {self.path}: {problem}")
                    else:
                        proxy.tally.accepted += 1
                        proxy.tally.paths.add(f"{self.command} {urlsplit(self.path).path}")
                if problem:
                    message = problem
                    if problem == "signature mismatch":  # in Amazon OpenSearch's words
                        message += (": The request signature we calculated does not match the "
                                    "signature you provided. Check your AWS Secret Access Key "
                                    "and signing method.")
                    self._reply(403, b'{"message":"' + message.encode() + b'"}',
                                [("Content-Type", "application/json")])
                    return
                answer = proxy.gate(self.command, self.path, body) if proxy.gate else None
                if answer is not None:
                    with proxy.tally.lock:
                        proxy.tally.gated.append(f"{self.command} {self.path} -> {answer[0]}")
                    self._reply(answer[0], answer[1], [("Content-Type", "application/json")]
                                if answer[1] else [])
                    return
                self._forward(body, headers)

            def _forward(self, body: bytes, headers: dict[str, str]) -> None:
                conn = http.client.HTTPConnection(proxy.upstream.hostname or "127.0.0.1",
                                                  proxy.upstream.port or 80, timeout=120)
                try:
                    sent = {k: v for k, v in headers.items() if k not in _HOP | {"host"}}
                    conn.request(self.command, self.path, body=body or None, headers=sent)
                    answer = conn.getresponse()
                    data = answer.read()
                    kept = [(k, v) for k, v in answer.getheaders()
                            if k.lower() not in _HOP | {"content-length"}]
                    self._reply(answer.status, data, kept)
                finally:
                    conn.close()

            def _reply(self, status: int, data: bytes, headers: list[tuple[str, str]]) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any

        return Handler


@contextmanager
def signing_proxy(upstream: str, monkeypatch: pytest.MonkeyPatch, key: str, secret: str,
                  region: str = "eu-west-1") -> Iterator[SigV4Proxy]:
    """A proxy expecting ``key``/``secret``, which boto3's chain then finds (in this process
    and in every worker it spawns)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with SigV4Proxy(upstream, Expected(key, secret, region)) as running:
        yield running
