"""A real HTTP forwarder in front of a real engine that dies after N bulk requests.

Used to make an engine fail *in the middle* of a batch without mocking it: requests go over
real sockets to the real OpenSearch; once the N-th ``_bulk`` has been answered the forwarder
stops listening and drops every connection, so the next call gets a real connection error.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class DyingProxy:
    """Forwards to ``upstream`` until ``bulks`` bulk writes of messages were answered; the next
    one finds it dead, and so does every request after it. (A bulk of the contact summary,
    which a batch writes after its messages, is forwarded like any other request: the batch
    whose messages went through is applied whole.)"""

    def __init__(self, upstream: str, bulks: int) -> None:
        target = urlparse(upstream)
        self.host, self.port = target.hostname or "127.0.0.1", target.port or 80
        self.bulks_left = bulks
        self.dead = threading.Event()
        self.forwarded = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                if proxy.dead.is_set():
                    self.close_connection = True
                    self.connection.close()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                messages = "_bulk" in self.path and b'-contacts"' not in (body or b"")
                if messages and proxy.bulks_left <= 0:
                    proxy.kill()
                    self.close_connection = True
                    self.connection.close()
                    return
                up = http.client.HTTPConnection(proxy.host, proxy.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                up.request(self.command, self.path, body=body, headers=headers)
                answer = up.getresponse()
                data = answer.read()
                up.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                proxy.forwarded += 1
                if messages:
                    proxy.bulks_left -= 1

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop listening: from now on connections are refused (or dropped if in flight)."""
        if self.dead.is_set():
            return
        self.dead.set()
        threading.Thread(target=self._close, daemon=True).start()

    def _close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
