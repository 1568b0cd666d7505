"""`serve`: one served agent under uvicorn, safe by default."""

from __future__ import annotations

import ipaddress
from typing import Any

from actors import Agent
from actors.exceptions import UserError
from actors.serve._a2a_door import a2a_door
from actors.serve._app import create_app
from actors.serve._guard import DEFAULT_RATE_LIMIT, RateLimit
from actors.store import SessionStore

__all__ = ["is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without a token.

    Raises:
        UserError: ``host`` is not a loopback address and no token is given.
    """
    if not is_loopback(host) and not token:
        raise UserError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run "
            "the agent; give a token (--token, or ACTORS_SERVE_TOKEN), or bind 127.0.0.1"
        )


def serve(
    agent: Agent[Any],
    store: SessionStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    tool_context: Any = None,
    idle_after: float | None = 60.0,
    max_body: int = 1 << 20,
    rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
    log_level: str = "warning",
    a2a: bool | None = None,
) -> None:
    """Serve ``agent`` over HTTP until interrupted (see `create_app` for the API).

    Args:
        agent: The root spec of every session.
        store: Where sessions live.
        host: The address to listen on; anything but loopback needs ``token``.
        port: The port.
        token: The bearer token every API request must carry.
        tool_context: The static channel of every session (never sent, never stored).
        idle_after: Seconds after which an idle session leaves memory.
        max_body: The largest request body, in bytes.
        rate_limit: Requests per client; None for no limit.
        log_level: uvicorn's log level.
        a2a: Also serve the agent over A2A (its card at ``/.well-known/agent-card.json``, the
            JSON-RPC methods at ``/a2a``): True, False, or None for "when ``a2a-sdk`` is
            installed".

    Raises:
        UserError: a non-loopback ``host`` without a ``token``; ``a2a=True`` without the SDK.
    """
    import uvicorn

    check_bind(host, token)
    routes, public = a2a_door(a2a, bearer=bool(token))
    app = create_app(
        agent,
        store,
        tool_context=tool_context,
        idle_after=idle_after,
        token=token,
        max_body=max_body,
        rate_limit=rate_limit,
        routes=routes,
        public_paths=public,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
