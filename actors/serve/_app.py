"""The HTTP API of one served agent: sessions, runs (JSON or server-sent events), answers.

`create_app` builds a starlette app around a `Runtime` and a store; `Server` (``app.state.
server``) is what its routes share, so other routes (an A2A door) can be mounted beside them
on the same runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from actors import Agent, AgentRef, Answer, RunResult, Runtime
from actors.exceptions import ActorsError, RunError, SessionNotFoundError
from actors.serve._errors import ApiError, api_error_of, error_response, handle_api_error
from actors.serve._guard import DEFAULT_RATE_LIMIT, Guard, RateLimit
from actors.serve._json import json_response, read_json
from actors.serve._openapi import openapi_document
from actors.serve._page import page_routes
from actors.serve._runs import RunChannel, Runs
from actors.serve._wire import (
    error_of,
    requests_of,
    result_of,
    session_of,
    transcript_of,
    tree_of,
    usage_report,
)
from actors.store import SessionStore, StoredSession

__all__ = ["Server", "create_app"]

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PUBLIC_PATHS = frozenset({"/", "/openapi.json", "/healthz"})
KEEPALIVE = 15.0


@dataclass
class Server:
    """What the routes of one served agent share.

    Attributes:
        agent: The root spec every session runs.
        store: Where sessions live.
        runtime: The runtime that hosts them (set when the app starts).
        runs: The runs in flight and the streams of recent ones.
        tool_context: The static channel given to every session's tools; never sent.
        max_body: The largest request body accepted, in bytes.
    """

    agent: Agent[Any]
    store: SessionStore
    runtime: Runtime | None
    runs: Runs
    tool_context: Any = None
    max_body: int = 1 << 20
    # Sessions seen to be this agent's: a run need not load a whole session to check it again.
    owned: set[str] = field(default_factory=set)

    # -- sessions -----------------------------------------------------------------------------

    def check_id(self, session_id: str) -> str:
        """``session_id`` if it is a usable id; else `ApiError` 400."""
        if not SESSION_ID.fullmatch(session_id):
            raise ApiError(
                400,
                "bad_session_id",
                "a session id is 1 to 128 letters, digits, '.', '_', ':' or '-', starting "
                "with a letter or digit",
            )
        return session_id

    def load(self, session_id: str) -> StoredSession:
        """The stored session, if it is one of this agent's (blocking); else `ApiError` 404."""
        self.check_id(session_id)
        try:
            stored = self.store.load(session_id)
        except SessionNotFoundError:
            raise _not_found(session_id) from None
        if stored.data.get("agent") != self.agent.name:
            raise _not_found(session_id)
        self.owned.add(session_id)
        return stored

    def check(self, session_id: str) -> None:
        """`load`'s check that the session is one of this agent's, once per session."""
        if session_id not in self.owned:
            self.load(session_id)

    async def acheck(self, session_id: str) -> None:
        """`check` from the event loop."""
        if session_id not in self.owned:
            await run_in_threadpool(self.load, session_id)

    def open(self, session_id: str, *, create: bool = False, metadata: Any = None) -> AgentRef:
        """The session's root agent: live, woken from the store, or (``create``) new.

        Blocking: call it in a thread.
        """
        self.check_id(session_id)
        runtime = self._runtime()
        try:
            exists = _exists(self.store, session_id)
            if exists and create:
                raise ApiError(409, "session_exists", f"session {session_id!r} exists already")
            if not exists and not create:
                raise _not_found(session_id)
            ref = runtime.open_session(
                self.agent,
                session_id=session_id,
                store=self.store,
                tool_context=self.tool_context,
                metadata=metadata,
            )
            self.owned.add(session_id)
            return ref
        except ActorsError as exc:
            raise api_error_of(exc) from None

    def _runtime(self) -> Runtime:
        if self.runtime is None:
            raise ApiError(503, "not_started", "the server is starting or stopping")
        return self.runtime

    async def aopen(self, session_id: str) -> AgentRef:
        """`open` from the event loop, for an existing session."""
        return await run_in_threadpool(self.open, session_id)


def _exists(store: SessionStore, session_id: str) -> bool:
    try:
        store.last_seq(session_id, "")
    except SessionNotFoundError:
        return False
    return True


def _not_found(session_id: str) -> ApiError:
    return ApiError(
        404, "session_not_found", f"no session {session_id!r}; create one with POST /sessions"
    )


def _server(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


def _session_id(request: Request) -> str:
    return _server(request).check_id(str(request.path_params["session_id"]))


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def _field(body: Any, name: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object")
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(400, "invalid_body", f"the body needs {name!r}")
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ApiError(400, "invalid_body", f"{name!r} must be {_json_type(names)}")
    return value


def _json_type(python: str) -> str:
    return {"str": "a string", "dict": "an object", "bool": "true or false"}.get(python, python)


# -- sessions ---------------------------------------------------------------------------------


async def agent_info(request: Request) -> Response:
    """GET /agent: the served agent."""
    agent = _server(request).agent
    return json_response({"name": agent.name, "description": agent.description})


async def health(request: Request) -> Response:
    """GET /healthz."""
    return json_response({"ok": True})


async def create_session(request: Request) -> Response:
    """POST /sessions: a new session (its root agent is idle until a run)."""
    server = _server(request)
    body = await read_json(request, server.max_body)
    session_id = _field(body, "session_id", str)
    metadata = _field(body, "metadata", dict)
    if session_id is None:
        session_id = uuid.uuid4().hex[:16]
    ref = await run_in_threadpool(server.open, session_id, create=True, metadata=metadata)
    stored = await run_in_threadpool(server.load, session_id)
    return json_response(
        session_of(stored, ref.status),
        201,
        {"Location": f"/sessions/{session_id}"},
    )


async def list_sessions(request: Request) -> Response:
    """GET /sessions: this agent's sessions, the newest first."""
    server = _server(request)
    limit = _int_param(request, "limit", 50, 1, 1000)
    offset = _int_param(request, "offset", 0, 0, None)
    infos = await run_in_threadpool(server.store.list_sessions)
    mine = [i for i in infos if i.data.get("agent") == server.agent.name]
    page = mine[offset : offset + limit]
    return json_response(
        {"sessions": [session_of(i) for i in page], "total": len(mine), "offset": offset}
    )


def _int_param(request: Request, name: str, default: int, low: int, high: int | None) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < low or (high is not None and int(text) > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise ApiError(400, "invalid_query", f"{name} must be an integer {bound}")
    return int(text)


async def get_session(request: Request) -> Response:
    """GET /sessions/{id}: the session's summary and its root's status."""
    server = _server(request)
    session_id = _session_id(request)
    stored = await run_in_threadpool(server.load, session_id)
    root = stored.agent(stored.root_agent_id).record if stored.agents else None
    active = server.runs.active(session_id)
    status = "running" if active else (root.status if root is not None else "idle")
    out = session_of(stored, status)
    out["run_id"] = active
    return json_response(out)


async def delete_session(request: Request) -> Response:
    """DELETE /sessions/{id}: stop its agents (cancelling a run) and delete it from the store."""
    server = _server(request)
    session_id = _session_id(request)
    await run_in_threadpool(server.load, session_id)

    def delete() -> None:
        try:
            ref = server.open(session_id)
        except ApiError as exc:
            if exc.code != "session_not_found":
                raise
        else:
            ref.stop()
        server.owned.discard(session_id)
        try:
            server.store.delete(session_id)
        except ActorsError as exc:
            raise api_error_of(exc) from None

    await run_in_threadpool(delete)
    return Response(status_code=204)


async def get_tree(request: Request) -> Response:
    """GET /sessions/{id}/tree: the agents of the session, live (this wakes a cold session)."""
    server = _server(request)
    session_id = _session_id(request)
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    node = await run_in_threadpool(ref.tree)
    return json_response(tree_of(node))


async def get_usage(request: Request) -> Response:
    """GET /sessions/{id}/usage: per agent and in all, as stored."""
    stored = await run_in_threadpool(_server(request).load, _session_id(request))
    return json_response(usage_report(stored))


async def get_requests(request: Request) -> Response:
    """GET /sessions/{id}/requests: the open requests of every agent of the session."""
    stored = await run_in_threadpool(_server(request).load, _session_id(request))
    return json_response({"requests": requests_of(stored)})


async def get_transcript(request: Request) -> Response:
    """GET /sessions/{id}/transcript[?agent_id=...]: an agent's messages (the root's)."""
    stored = await run_in_threadpool(_server(request).load, _session_id(request))
    agent_id = request.query_params.get("agent_id", stored.root_agent_id)
    try:
        messages = transcript_of(stored, agent_id)
    except KeyError:
        raise ApiError(
            404, "agent_not_found", f"session {stored.session_id!r} has no agent {agent_id!r}"
        ) from None
    return json_response({"agent_id": agent_id, "messages": messages})


# -- runs -------------------------------------------------------------------------------------


async def start_run(request: Request) -> Response:
    """POST /sessions/{id}/runs: run a prompt; the result, or the run's events (SSE)."""
    server = _server(request)
    session_id = _session_id(request)
    body = await read_json(request, server.max_body)
    prompt = _field(body, "prompt", str, required=True)
    cancel = bool(_field(body, "cancel_on_disconnect", bool))
    return await _run(
        request,
        session_id,
        lambda ref: ref.arun_stream(prompt),
        lambda ref: ref.run_async(prompt),
        cancel,
    )


async def answer(request: Request) -> Response:
    """POST /sessions/{id}/answers: answer open requests; the continued run (JSON or SSE)."""
    server = _server(request)
    session_id = _session_id(request)
    body = await read_json(request, server.max_body)
    given = _field(body, "answers", dict, required=True)
    cancel = bool(_field(body, "cancel_on_disconnect", bool))
    answers: dict[str, Answer] = {}
    for request_id, value in given.items():
        if isinstance(value, bool):
            value = {"ok": value}
        try:
            answers[request_id] = Answer.model_validate(value)
        except ValueError as exc:
            raise ApiError(
                400, "invalid_body", f"answer to {request_id!r} is not an Answer: {exc}"
            ) from None
    return await _run(
        request,
        session_id,
        lambda ref: ref.aresume_stream(answers),
        lambda ref: ref.resume_async(answers),
        cancel,
    )


async def _run(
    request: Request,
    session_id: str,
    stream: Callable[[AgentRef], AsyncIterator[Any]],
    run: Callable[[AgentRef], Any],
    cancel_on_disconnect: bool,
) -> Response:
    server = _server(request)
    await server.acheck(session_id)
    run_id = server.runs.begin(session_id)
    if run_id is None:
        active = server.runs.active(session_id)
        raise ApiError(
            409,
            "run_in_progress",
            f"session {session_id!r} is running {active}; follow it at "
            f"/sessions/{session_id}/runs/{active}/events, steer it, or cancel it",
        )
    try:
        ref = await server.aopen(session_id)
    except BaseException:
        server.runs.finish(session_id, run_id)
        raise
    if _wants_stream(request):
        channel = server.runs.stream(session_id, run_id, lambda: stream(ref), lambda: None)
        return _sse(channel, -1, ref if cancel_on_disconnect else None)
    loop = asyncio.get_running_loop()
    try:
        future = run(ref)
    except BaseException:
        server.runs.finish(session_id, run_id)
        raise
    # The session is free when the run ends, whether or not this client is still waiting.
    future.add_done_callback(
        lambda _f: loop.call_soon_threadsafe(server.runs.finish, session_id, run_id)
    )
    try:
        result: RunResult[Any] = await _outcome(
            request, future, ref if cancel_on_disconnect else None
        )
    except RunError as exc:
        return json_response({"run_id": run_id, "result": None, "error": error_of(exc)})
    except ActorsError as exc:
        raise api_error_of(exc) from None
    return json_response({"run_id": run_id, "result": result_of(result), "error": None})


async def _outcome(request: Request, future: Any, cancel: AgentRef | None) -> RunResult[Any]:
    """The run's result; when asked, a client that disconnects first cancels the run."""
    if cancel is None:
        result: RunResult[Any] = await future
        return result
    run = asyncio.ensure_future(future)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((run, gone), return_when=asyncio.FIRST_COMPLETED)
        if not run.done():
            cancel.cancel("the client disconnected")
        result = await run
        return result
    finally:
        gone.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _sse(channel: RunChannel, after: int, cancel: AgentRef | None) -> Response:
    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in channel.follow(after, KEEPALIVE):
                yield chunk
        finally:
            # Only a client that asked for it cancels its run by leaving; otherwise the run
            # goes on and its events wait here (and in the store) for the client's return.
            if cancel is not None and not channel.ended:
                cancel.cancel("the client disconnected")

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: pass each event on at once
            "X-Run-Id": channel.run_id,
            "Location": f"/sessions/{channel.session_id}/runs/{channel.run_id}/events",
        },
    )


async def follow_run(request: Request) -> Response:
    """GET /sessions/{id}/runs/{run_id}/events: a run's events, from ``Last-Event-ID`` on."""
    server = _server(request)
    session_id = _session_id(request)
    run_id = str(request.path_params["run_id"])
    channel = server.runs.channel(run_id)
    if channel is None or channel.session_id != session_id:
        raise ApiError(
            404,
            "run_not_found",
            f"no stream of run {run_id!r} here (it ended a while ago, or another server runs "
            "it); read the session's transcript instead",
        )
    last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    after = -1
    if last is not None:
        if not last.strip().lstrip("-").isdigit():
            raise ApiError(400, "invalid_last_event_id", "Last-Event-ID must be an event id")
        after = int(last)
    return _sse(channel, after, None)


async def steer(request: Request) -> Response:
    """POST /sessions/{id}/steer: a user message for the run's next step (or the next run)."""
    server = _server(request)
    session_id = _session_id(request)
    body = await read_json(request, server.max_body)
    message = _field(body, "message", str, required=True)
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    ref.send(message)
    return json_response({"ok": True}, 202)


async def cancel_run(request: Request) -> Response:
    """POST /sessions/{id}/cancel: cancel the run in progress (and its subagents)."""
    server = _server(request)
    session_id = _session_id(request)
    body = await read_json(request, server.max_body)
    reason = _field(body, "reason", str) or "cancelled by a client"
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    ref.cancel(reason)
    return json_response({"ok": True, "run_id": server.runs.active(session_id)}, 202)


async def openapi(request: Request) -> Response:
    """GET /openapi.json."""
    return json_response(openapi_document(_server(request).agent))


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
