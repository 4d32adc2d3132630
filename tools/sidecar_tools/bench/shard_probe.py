"""A recording HTTP forwarder in front of a real OpenSearch: how many shards each search touched.

Searches are routed by mailbox (``routing = mailbox_id``), so on an index of several primaries
each one should run on exactly one shard. Nothing in a search *answer* of the API says so, but
every OpenSearch ``_search`` response does (``_shards.total``). The API (or any client) is
pointed at :attr:`ShardProbe.url`; the probe forwards each request unchanged over real sockets
and records, for every ``_search``/``_msearch`` response, its path, its ``routing`` parameter
and ``_shards.total``. Used by ``sidecar bench-tenants`` (the fraction of one-shard searches)
and by the fan-out test; it never changes a request or an answer (it only asks the engine for
an uncompressed body, so it can read it).
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
        "accept-encoding"}


@dataclass(frozen=True, slots=True)
class SearchShards:
    """One search the engine answered: its path, the ``routing`` it asked for (None: none)
    and the number of shards it ran on (``_shards.total``)."""

    path: str
    routing: str | None
    shards: int


class ShardProbe:
    """Forwards to ``upstream`` (one OpenSearch URL) and records every search's shard count."""

    def __init__(self, upstream: str) -> None:
        target = urlparse(upstream.split(",")[0])
        self.host, self.port = target.hostname or "127.0.0.1", target.port or 9200
        self._lock = threading.Lock()
        self._seen: list[SearchShards] = []
        probe = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                """Quiet: the bench's output is its report."""

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                up = getattr(self, "_up", None)
                if up is None:
                    up = self._up = http.client.HTTPConnection(probe.host, probe.port, timeout=120)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                try:
                    up.request(self.command, self.path, body=body, headers=headers)
                    answer = up.getresponse()
                except (http.client.HTTPException, OSError):
                    up.close()  # a stale keep-alive connection: once more on a new one
                    up = self._up = http.client.HTTPConnection(probe.host, probe.port,
                                                               timeout=120)
                    up.request(self.command, self.path, body=body, headers=headers)
                    answer = up.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                probe._record(self.path, data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _record(self, path: str, data: bytes) -> None:
        parsed = urlparse(path)
        if not (parsed.path.endswith("/_search") or parsed.path.endswith("/_msearch")):
            return
        try:
            answer = json.loads(data)
        except ValueError:
            return
        routings = parse_qs(parsed.query).get("routing") or []
        routing = routings[0] if routings else None
        answers = answer.get("responses", []) if parsed.path.endswith("/_msearch") else [answer]
        found = [SearchShards(parsed.path, routing, int(a["_shards"]["total"]))
                 for a in answers if isinstance(a, dict) and "_shards" in a]
        with self._lock:
            self._seen.extend(found)

    def take(self) -> list[SearchShards]:
        """The searches recorded since the last call (and forget them)."""
        with self._lock:
            seen, self._seen = self._seen, []
        return seen

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def one_shard_fraction(seen: list[SearchShards]) -> float | None:
    """Share of the recorded searches that ran on exactly one shard (None: none recorded)."""
    return sum(s.shards == 1 for s in seen) / len(seen) if seen else None
