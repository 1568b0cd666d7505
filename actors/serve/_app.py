"""The HTTP API of one served agent: sessions, runs (JSON or server-sent events), answers.

`create_app` builds a starlette app around a `Runtime` and a store; `Server` (``app.state.
server``) is what its routes share, so other routes (an A2A door) can be mounted beside them
on the same runtime.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from actors import Agent, Runtime
from actors.serve._api_error import ApiError
from actors.serve._errors import error_response, handle_api_error
from actors.serve._guard import DEFAULT_RATE_LIMIT, Guard, RateLimit
from actors.serve._json import json_response
from actors.serve._openapi import openapi_document
from actors.serve._page import page_routes
from actors.serve._run_routes import answer, cancel_run, follow_run, start_run, steer
from actors.serve._runs import Runs
from actors.serve._session_routes import (
    agent_info,
    create_session,
    delete_session,
    get_requests,
    get_session,
    get_transcript,
    get_tree,
    get_usage,
    health,
    list_sessions,
)
from actors.serve._state import Server, server_of
from actors.store import SessionStore

__all__ = ["Server", "api_routes", "create_app"]

PUBLIC_PATHS = frozenset({"/", "/openapi.json", "/healthz"})


async def openapi(request: Request) -> Response:
    """GET /openapi.json."""
    return json_response(openapi_document(server_of(request).agent))


def api_routes() -> list[BaseRoute]:
    """The API's routes (they find their `Server` in ``app.state.server``)."""
    return [
        Route("/healthz", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/agent", agent_info, methods=["GET"]),
        Route("/sessions", create_session, methods=["POST"]),
        Route("/sessions", list_sessions, methods=["GET"]),
        Route("/sessions/{session_id}", get_session, methods=["GET"]),
        Route("/sessions/{session_id}", delete_session, methods=["DELETE"]),
        Route("/sessions/{session_id}/tree", get_tree, methods=["GET"]),
        Route("/sessions/{session_id}/usage", get_usage, methods=["GET"]),
        Route("/sessions/{session_id}/requests", get_requests, methods=["GET"]),
        Route("/sessions/{session_id}/transcript", get_transcript, methods=["GET"]),
        Route("/sessions/{session_id}/runs", start_run, methods=["POST"]),
        Route("/sessions/{session_id}/runs/{run_id}/events", follow_run, methods=["GET"]),
        Route("/sessions/{session_id}/answers", answer, methods=["POST"]),
        Route("/sessions/{session_id}/steer", steer, methods=["POST"]),
        Route("/sessions/{session_id}/cancel", cancel_run, methods=["POST"]),
    ]


async def _not_found_route(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    if status == 405:
        return error_response(405, "method_not_allowed", f"{request.method} is not allowed here")
    return error_response(404, "not_found", f"no route {request.url.path}")


async def _internal(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal", f"{type(exc).__name__}: the server failed")


def create_app(
    agent: Agent[Any],
    store: SessionStore,
    *,
    runtime: Runtime | None = None,
    tool_context: Any = None,
    idle_after: float | None = 60.0,
    token: str | None = None,
    max_body: int = 1 << 20,
    rate_limit: RateLimit | None = DEFAULT_RATE_LIMIT,
    keep_streams: float = 300.0,
    page: bool = True,
    routes: Sequence[BaseRoute] = (),
    public_paths: Collection[str] = (),
) -> Starlette:
    """A starlette app that serves ``agent``: a JSON and SSE API, and a chat page at ``/``.

    Every session is a tree of ``agent`` in ``store``, hosted by ``runtime`` (by default one
    made when the app starts, with ``idle_after``, and shut down when it stops): an idle
    session is passivated to the store and woken by the next request.

    Args:
        agent: The root spec of every session.
        store: Where sessions live (`SQLiteStore`, or `PostgresStore` for several processes).
        runtime: The runtime to host sessions in; None makes one for the app's lifetime.
        tool_context: The static channel given to every session's tools; never sent to a
            client, never stored.
        idle_after: Seconds after which an idle session leaves memory (when the app makes
            its runtime).
        token: A bearer token every API request must carry; None for none (loopback only).
        max_body: The largest request body, in bytes (larger: 413).
        rate_limit: Requests per client (by address); None for no limit (larger: 429).
        keep_streams: Seconds a finished run's events stay readable with ``Last-Event-ID``.
        page: Serve the chat page at ``/``.
        routes: More routes, mounted beside the API (they find `Server` in
            ``request.app.state.server``); the token and the rate limit guard them too.
        public_paths: Paths of those routes that need no token (an agent card).
    """
    server = Server(
        agent=agent,
        store=store,
        runtime=runtime,
        runs=Runs(keep_streams),
        tool_context=tool_context,
        max_body=max_body,
    )
    own_runtime = runtime is None

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        if own_runtime:
            server.runtime = Runtime(idle_after=idle_after)
        try:
            yield
        finally:
            await server.runs.aclose()
            if own_runtime and server.runtime is not None:
                made, server.runtime = server.runtime, None
                await run_in_threadpool(made.shutdown)

    app = Starlette(
        routes=[*api_routes(), *(page_routes() if page else []), *routes],
        lifespan=lifespan,
        exception_handlers={
            ApiError: handle_api_error,
            404: _not_found_route,
            405: _not_found_route,
            Exception: _internal,
        },
    )
    app.state.server = server
    public = frozenset(PUBLIC_PATHS | set(public_paths))
    app.add_middleware(Guard, token=token, rate_limit=rate_limit, public=public)
    return app
