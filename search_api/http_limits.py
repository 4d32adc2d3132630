"""The API's HTTP server refuses an oversized request head before reading it all.

uvicorn's default parser (httptools) has no limit on a request's head: a 32 MB
``Authorization`` header was read whole and answered 401 after 1.6 s (issue 38). This server
protocol (h11's, with its receive buffer bounded) answers **431 Request Header Fields Too
Large** as soon as the head of a request passes :data:`MAX_HEAD_BYTES`, and closes the
connection; nothing of it reaches the app.
"""

from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD_BYTES = 64 * 1024  # request line + headers; a JWT with many claims is ~2-8 KB

_MESSAGE = (f"request headers larger than {MAX_HEAD_BYTES // 1024} KB: send a shorter "
            "Authorization (or other) header").encode("ascii")
_431 = (b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        b"content-length: " + str(len(_MESSAGE)).encode("ascii") + b"\r\n\r\n" + _MESSAGE)


class BoundedHeadProtocol(H11Protocol):
    """uvicorn's h11 protocol with the request head bounded (431 past it, then closed)."""

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # still reading a request line and headers
            buffered = len(self.conn.trailing_data[0])
            if buffered + len(data) > MAX_HEAD_BYTES:
                self.transport.write(_431)
                self.transport.close()
                return
        super().data_received(data)


def server_options() -> dict[str, object]:
    """The ``uvicorn.Config`` options that bound the head (h11's own bound kept above ours as
    a backstop: it would answer a plain 400)."""
    return {"http": BoundedHeadProtocol, "h11_max_incomplete_event_size": 2 * MAX_HEAD_BYTES}
