"""The run routes: start a run or answer requests (JSON or SSE), follow a run, steer, cancel."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from actors import AgentRef, Answer, RunResult
from actors.exceptions import ActorsError, RunError
from actors.serve._api_error import ApiError
from actors.serve._errors import api_error_of
from actors.serve._json import json_response, read_json
from actors.serve._runs import RunChannel
from actors.serve._state import content_of, field_of, server_of, session_id_of, wants_stream
from actors.serve._wire import error_of, result_of

__all__ = ["KEEPALIVE", "answer", "cancel_run", "follow_run", "start_run", "steer"]

KEEPALIVE = 15.0


async def start_run(request: Request) -> Response:
    """POST /sessions/{id}/runs: run a prompt; the result, or the run's events (SSE)."""
    server = server_of(request)
    session_id = session_id_of(request)
    body = await read_json(request, server.max_body)
    prompt = content_of(body, "prompt")
    cancel = bool(field_of(body, "cancel_on_disconnect", bool))
    return await _run(
        request,
        session_id,
        lambda ref: ref.arun_stream(prompt),
        lambda ref: ref.run_async(prompt),
        cancel,
    )


async def answer(request: Request) -> Response:
    """POST /sessions/{id}/answers: answer open requests; the continued run (JSON or SSE)."""
    server = server_of(request)
    session_id = session_id_of(request)
    body = await read_json(request, server.max_body)
    given = field_of(body, "answers", dict, required=True)
    cancel = bool(field_of(body, "cancel_on_disconnect", bool))
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
    server = server_of(request)
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
    if wants_stream(request):
        channel = server.runs.stream(session_id, run_id, lambda: stream(ref), lambda: None)
        return _sse(channel, -1, ref if cancel_on_disconnect else None)
    loop = asyncio.get_running_loop()
    try:
        future = run(ref)
    except BaseException as exc:
        server.runs.finish(session_id, run_id)
        if isinstance(exc, ActorsError):
            raise api_error_of(exc) from None
        raise

    def free(_future: Any) -> None:
        # The session is free when the run ends, whether or not this client still waits.
        with contextlib.suppress(RuntimeError):  # the server stopped: nothing to free
            loop.call_soon_threadsafe(server.runs.finish, session_id, run_id)

    future.add_done_callback(free)
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
    server = server_of(request)
    session_id = session_id_of(request)
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
    server = server_of(request)
    session_id = session_id_of(request)
    body = await read_json(request, server.max_body)
    message = content_of(body, "message")
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    ref.send(message)
    return json_response({"ok": True}, 202)


async def cancel_run(request: Request) -> Response:
    """POST /sessions/{id}/cancel: cancel the run in progress (and its subagents)."""
    server = server_of(request)
    session_id = session_id_of(request)
    body = await read_json(request, server.max_body)
    reason = field_of(body, "reason", str) or "cancelled by a client"
    await server.acheck(session_id)
    ref = await server.aopen(session_id)
    ref.cancel(reason)
    return json_response({"ok": True, "run_id": server.runs.active(session_id)}, 202)
