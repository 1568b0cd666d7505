"""Serving: an agent behind an HTTP API with server-sent events, and a chat page.

Needs starlette and uvicorn: ``pip install 'actors[serve]'``. Importing ``actors`` never
imports them; importing ``actors.serve`` without them raises an `ImportError` naming the extra.

- `create_app(agent, store)`: a starlette app. Sessions (create, list, read, delete), runs whose
  result comes as JSON or whose whole tree's events come as server-sent events (resumable with
  ``Last-Event-ID``), answers to open requests, steering, cancelling; an OpenAPI document at
  ``/openapi.json`` and a chat page at ``/``. Every session is a virtual agent of one
  `Runtime`: idle, it sleeps in the store; a request wakes it.
- `serve(agent, store)`: run that app with uvicorn; refuses a non-loopback address without a
  token. The command line: ``actors serve MODULE:AGENT``.
- `a2a_routes()` and `a2a_public_paths()`: the agent as an A2A agent (``pip install
  'actors[a2a]'``), for ``create_app(routes=..., public_paths=...)``; `serve` mounts them when
  the SDK is installed. Imported on first use, so the SDK is never imported otherwise.
"""

from typing import Any

from actors.serve._require import require_serve

require_serve()

from actors.serve._app import Server, create_app  # noqa: E402 (after the dependency check)
from actors.serve._guard import RateLimit  # noqa: E402
from actors.serve._server import is_loopback, serve  # noqa: E402

__all__ = [
    "RateLimit",
    "Server",
    "a2a_public_paths",
    "a2a_routes",
    "create_app",
    "is_loopback",
    "serve",
]


def __getattr__(name: str) -> Any:
    # The A2A door imports the SDK: only when it is asked for.
    if name in ("a2a_routes", "a2a_public_paths"):
        from actors.serve._a2a_door import a2a_installed

        if not a2a_installed():
            raise ImportError(
                "actors.serve's A2A door needs the A2A SDK; install it with: "
                "pip install 'actors[a2a]'",
                name="a2a",
            )
        from actors.serve import _a2a

        return getattr(_a2a, name)
    raise AttributeError(f"module 'actors.serve' has no attribute {name!r}")
