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
"""

from actors.serve._require import require_serve

require_serve()

from actors.serve._app import Server, create_app  # noqa: E402 (after the dependency check)
from actors.serve._guard import RateLimit  # noqa: E402
from actors.serve._server import is_loopback, serve  # noqa: E402

__all__ = ["RateLimit", "Server", "create_app", "is_loopback", "serve"]
