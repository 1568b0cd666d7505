"""The session routes: create, list, read (summary, tree, usage, requests, transcript), delete."""

from __future__ import annotations

import uuid

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from actors.exceptions import ActorsError
from actors.serve._api_error import ApiError
from actors.serve._errors import api_error_of
from actors.serve._json import json_response, read_json
from actors.serve._state import field_of, server_of, session_id_of
from actors.serve._wire import (
    requests_of,
    session_of,
    transcript_of,
    tree_of,
    usage_report,
)

__all__ = [
    "agent_info",
    "create_session",
    "delete_session",
    "get_requests",
    "get_session",
    "get_transcript",
    "get_tree",
    "get_usage",
    "health",
    "list_sessions",
]


async def agent_info(request: Request) -> Response:
    """GET /agent: the served agent."""
    agent = server_of(request).agent
    return json_response({"name": agent.name, "description": agent.description})


async def health(request: Request) -> Response:
    """GET /healthz."""
    return json_response({"ok": True})


async def create_session(request: Request) -> Response:
    """POST /sessions: a new session (its root agent is idle until a run)."""
    server = server_of(request)
    body = await read_json(request, server.max_body)
    session_id = field_of(body, "session_id", str)
    metadata = field_of(body, "metadata", dict)
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
    server = server_of(request)
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
    server = server_of(request)
    session_id = session_id_of(request)
    stored = await run_in_threadpool(server.load, session_id)
    root = stored.agent(stored.root_agent_id).record if stored.agents else None
    active = server.runs.active(session_id)
    status = "running" if active else (root.status if root is not None else "idle")
    out = session_of(stored, status)
    out["run_id"] = active
    return json_response(out)


async def delete_session(request: Request) -> Response:
    """DELETE /sessions/{id}: stop its agents (cancelling a run) and delete it from the store."""
    server = server_of(request)
    session_id = session_id_of(request)
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
    server = server_of(request)
    session_id = session_id_of(request)
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    node = await run_in_threadpool(ref.tree)
    return json_response(tree_of(node))


async def get_usage(request: Request) -> Response:
    """GET /sessions/{id}/usage: per agent and in all, as stored."""
    stored = await run_in_threadpool(server_of(request).load, session_id_of(request))
    return json_response(usage_report(stored))


async def get_requests(request: Request) -> Response:
    """GET /sessions/{id}/requests: the open requests of every agent of the session."""
    stored = await run_in_threadpool(server_of(request).load, session_id_of(request))
    return json_response({"requests": requests_of(stored)})


async def get_transcript(request: Request) -> Response:
    """GET /sessions/{id}/transcript[?agent_id=...]: an agent's messages (the root's)."""
    stored = await run_in_threadpool(server_of(request).load, session_id_of(request))
    agent_id = request.query_params.get("agent_id", stored.root_agent_id)
    try:
        messages = transcript_of(stored, agent_id)
    except KeyError:
        raise ApiError(
            404, "agent_not_found", f"session {stored.session_id!r} has no agent {agent_id!r}"
        ) from None
    return json_response({"agent_id": agent_id, "messages": messages})
