"""The chat page: three static files shipped with the package, no build step, no CDN."""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from actors.serve._errors import ApiError

__all__ = ["page_routes"]

FILES = {
    "index.html": "text/html; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "chat.css": "text/css; charset=utf-8",
}
# The page loads nothing from elsewhere and runs no inline script: a token in it stays here.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _file(name: str) -> Response:
    data = resources.files("actors.serve").joinpath("static", name).read_bytes()
    return Response(data, media_type=FILES[name], headers=HEADERS)


async def index(_request: Request) -> Response:
    """GET /: the chat page."""
    return _file("index.html")


async def static(request: Request) -> Response:
    """GET /static/{name}: the page's script and style."""
    name = str(request.path_params["name"])
    if name not in FILES:
        raise ApiError(404, "not_found", f"no file {name!r}")
    return _file(name)


def page_routes() -> list[BaseRoute]:
    """The page's routes."""
    return [
        Route("/", index, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
    ]
