"""The search console: a static page served by the API itself at ``/console``.

HTML, CSS and a little JavaScript, no build step and nothing from a CDN. The page calls the
public API only (same endpoints, same bearer token, same mailbox scoping): it holds no power
of its own, so serving it adds no access path. The strict Content-Security-Policy allows
scripts, styles and requests from this origin only and no inline script at all, so even a
rendering mistake could not run a script that came in a mail.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from fastapi import APIRouter, FastAPI, Response

CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def _endpoint(body: bytes, media_type: str) -> Callable[[], Response]:
    def endpoint() -> Response:
        return Response(body, media_type=media_type, headers=HEADERS)

    return endpoint


def mount(app: FastAPI) -> None:
    """Add ``/console`` and its assets (read once, from the package's data)."""
    here = files(__package__)
    router = APIRouter(include_in_schema=False)
    for name, media_type in ASSETS.items():
        path = "/console" if name == "index.html" else f"/console/{name}"
        body = here.joinpath(name).read_bytes()
        router.add_api_route(path, _endpoint(body, media_type), methods=["GET"])
    app.include_router(router)
