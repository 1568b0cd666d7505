"""The A2A door of a served agent: an agent card and the A2A JSON-RPC methods, on the SDK.

The SDK (``a2a-sdk``) speaks the protocol: JSON-RPC, streaming, its task store and the task
state machine. What is ours is the `AgentExecutor` that maps it onto the served sessions:

- an A2A context is a session (``context_id`` is the session id; a new one is created on the
  first message), an A2A task is a run of that session;
- ``message/send`` and ``message/stream`` start a run; every `StreamEvent` of the session's tree
  becomes a ``working`` status update whose metadata ``actors_event`` is the event as the JSON
  API gives it; the final answer is an artifact named ``result``;
- a run that suspends (an approval, a `Pending` request) leaves its task ``input-required``,
  its status message listing the requests; the next message on that task answers them (see
  `answers_of`) and the run goes on;
- ``tasks/cancel`` cancels the run and its subagents; ``tasks/get`` reads the SDK's task store.

Importing this module imports the SDK: `actors.serve` imports it only when A2A is asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    SecurityRequirement,
    SecurityScheme,
    TaskState,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
)
from google.protobuf.json_format import MessageToDict
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from actors import AgentRef, Answer, Request, RunEnded, RunResult, StreamEvent, __version__
from actors.context._parts import (
    BinaryPart,
    Content,
    InvalidContentError,
    coerce_content,
    file_part,
    part_class,
)
from actors.serve._api_error import ApiError
from actors.serve._state import Server
from actors.serve._wire import error_of, event_of, jsonable, requests_of

__all__ = ["A2A_CARD_PATH", "A2A_PATH", "a2a_public_paths", "a2a_routes", "answers_of"]

A2A_PATH = "/a2a"
"""Where the JSON-RPC endpoint is mounted by default."""

A2A_CARD_PATH = AGENT_CARD_WELL_KNOWN_PATH
"""Where the agent card is served (public: a client reads it before it can authenticate)."""

EVENT_KEY = "actors_event"
"""The metadata key of a status update that carries one of our `StreamEvent`s."""

REQUESTS_KEY = "actors_requests"
"""The metadata key of an ``input-required`` status that lists the open requests."""

_YES = frozenset({"y", "yes", "ok", "okay", "approve", "approved", "allow", "true", "go"})

_SERVER_KEY = "actors_server"


def a2a_public_paths() -> frozenset[str]:
    """The paths of `a2a_routes` that need no token: the agent card."""
    return frozenset({A2A_CARD_PATH})


def a2a_routes(path: str = A2A_PATH, *, bearer: bool = False) -> list[BaseRoute]:
    """The A2A routes to mount beside the API with ``create_app(routes=...)``.

    They serve the app's agent (``app.state.server``): its card at
    ``/.well-known/agent-card.json`` (give `a2a_public_paths` as ``public_paths`` so clients
    can read it without the token) and the A2A JSON-RPC methods at ``path``.

    Args:
        path: Where the JSON-RPC endpoint is mounted.
        bearer: Whether the card says that requests need a bearer token (the app has one).
    """
    placeholder = _card("actors", "", f"http://localhost{path}", token=False)
    handler = DefaultRequestHandler(
        agent_executor=SessionExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=placeholder,
    )

    async def card(request: HttpRequest) -> Response:
        server = _server_of_app(request)
        base = str(request.base_url).rstrip("/")
        made = _card(server.agent.name, server.agent.description, base + path, token=bearer)
        # The SDK's own rendering: A2A 1.0, with the 0.3 fields beside for older clients.
        return JSONResponse(agent_card_to_dict(made))

    return [
        Route(A2A_CARD_PATH, card, methods=["GET"]),
        *create_jsonrpc_routes(
            handler, path, context_builder=_ContextBuilder(), enable_v0_3_compat=True
        ),
    ]


def _card(name: str, description: str, url: str, *, token: bool) -> AgentCard:
    card = AgentCard(
        name=name,
        description=description or f"the {name} agent",
        version=__version__,
        # The same endpoint speaks A2A 1.0 and, for older clients, 0.3.
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=version)
            for version in (PROTOCOL_VERSION_CURRENT, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id=name,
                name=name,
                description=description or f"the {name} agent",
                tags=["actors"],
            )
        ],
    )
    if token:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        requirement = SecurityRequirement()
        requirement.schemes["bearer"].SetInParent()  # the scheme, with no scopes
        card.security_requirements.append(requirement)
    return card


def _server_of_app(request: HttpRequest) -> Server:
    server: Server = request.app.state.server
    return server


class _ContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the app's `Server` (the executor's way to the sessions)."""

    def build(self, request: HttpRequest) -> ServerCallContext:
        context = super().build(request)
        context.state[_SERVER_KEY] = _server_of_app(request)
        return context


def _server_of(context: RequestContext) -> Server:
    server: Server = context.call_context.state[_SERVER_KEY]
    return server


class SessionExecutor(AgentExecutor):
    """Runs A2A tasks as runs of served sessions (``context_id`` = session id)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start a run for a new task, or answer the open requests of an input-required one."""
        server = _server_of(context)
        message = context.message
        if message is None:  # the SDK always gives one to execute; a guard for the types
            raise ValueError("an A2A request without a message")
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        session_id = task.context_id
        resuming = task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        try:
            server.check_id(session_id)
        except ApiError as exc:
            await updater.failed(_agent_text(updater, f"{exc.code}: {exc.message}"))
            return
        # Claim the session before anything starts: one run at a time, whichever door.
        run_id = server.runs.begin(session_id)
        if run_id is None:
            text = f"session {session_id!r} is running another run; retry when it ends"
            if resuming:  # the question still stands: the task stays answerable
                await updater.requires_input(_agent_text(updater, text))
            else:
                await updater.failed(_agent_text(updater, text))
            return
        try:
            events = await self._start(server, session_id, message, resuming, updater)
            if events is None:
                return
            ref, stream = events
            await updater.start_work()
            ended = await _forward(stream, ref.agent_id, updater)
        finally:
            server.runs.finish(session_id, run_id)
        await _finish(ended, updater)

    async def _start(
        self,
        server: Server,
        session_id: str,
        message: Message,
        resuming: bool,
        updater: TaskUpdater,
    ) -> tuple[AgentRef, AsyncIterator[StreamEvent]] | None:
        """The session's root and the stream of its run (new, or resumed with the answers).

        None when the task ended here (the session cannot run; the answers were malformed).
        """
        try:
            ref = await run_in_threadpool(_open_or_create, server, session_id)
            if not resuming:
                return ref, ref.arun_stream(_prompt_of(message))
            stored = await run_in_threadpool(server.load, session_id)
            opened = [Request.model_validate(r) for r in requests_of(stored)]
            try:
                answers = answers_of(message, opened)
            except ValueError as exc:
                # A malformed answer changes nothing: the same requests are asked again.
                asked = _requests_message(
                    updater, tuple(opened), f"That answer was not valid: {exc}"
                )
                await updater.requires_input(asked)
                return None
            return ref, ref.aresume_stream(answers)
        except ApiError as exc:
            await updater.failed(_agent_text(updater, f"{exc.code}: {exc.message}"))
            return None

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run (and its subagents); the task ends ``canceled``."""
        server = _server_of(context)
        session_id = context.context_id
        task_id = context.task_id
        if session_id is None or task_id is None:
            return
        ref = await server.aopen(session_id)
        ref.cancel("cancelled by an A2A client")
        await TaskUpdater(event_queue, task_id, session_id).cancel()


def _open_or_create(server: Server, session_id: str) -> AgentRef:
    try:
        server.check(session_id)
    except ApiError as exc:
        if exc.status != 404 or exc.code != "session_not_found":
            raise
        return server.open(session_id, create=True)
    return server.open(session_id)


async def _forward(
    events: AsyncIterator[StreamEvent], root_id: str, updater: TaskUpdater
) -> RunEnded | None:
    """Every event of the tree as a ``working`` status update; the root's `RunEnded`."""
    ended: RunEnded | None = None
    async for event in events:
        if isinstance(event, RunEnded) and event.agent_id == root_id:
            ended = event
            continue
        await updater.update_status(
            TaskState.TASK_STATE_WORKING, metadata={EVENT_KEY: event_of(event)}
        )
    return ended


async def _finish(ended: RunEnded | None, updater: TaskUpdater) -> None:
    if ended is None or ended.error is not None or ended.result is None:
        error = ended.error if ended is not None else None
        text = f"{error_of(error)['type']}: {error}" if error is not None else "the run ended early"
        await updater.failed(_agent_text(updater, text))
        return
    result: RunResult[Any] = ended.result
    if result.status == "completed":
        await updater.add_artifact([_part_of(result.output)], name="result", last_chunk=True)
        await updater.complete()
    elif result.status == "suspended":
        await updater.requires_input(_requests_message(updater, result.requests))
    else:
        await updater.cancel(_agent_text(updater, "the run was cancelled"))


def _part_of(output: Any) -> Part:
    if isinstance(output, str):
        return new_text_part(output)
    return new_data_part(jsonable(output))


def _agent_text(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


def _requests_message(
    updater: TaskUpdater, requests: tuple[Request, ...], note: str = ""
) -> Message:
    lines = [note] if note else []
    for request in requests:
        what = "approve" if request.kind == "approval" else request.kind
        lines.append(f"[{what}] {request.prompt}".rstrip())
    listed = [r.model_dump(mode="json") for r in requests]
    hint = (
        "Answer on this task: 'yes' or 'no' for an approval, the value for an input, or a data "
        'part {"answers": {request_id: {"ok": true, "data": ...}}}.'
    )
    return updater.new_agent_message(
        [new_text_part("\n".join([*lines, hint])), new_data_part({"requests": listed})],
        metadata={REQUESTS_KEY: listed},
    )


def _prompt_of(message: Message) -> Content:
    if any(part.HasField("raw") or part.HasField("url") for part in message.parts):
        return _parts_of(message)
    texts = [part.text for part in message.parts if part.HasField("text")]
    if texts:
        return "\n".join(texts)
    data = [MessageToDict(part.data) for part in message.parts if part.HasField("data")]
    if data:
        import json

        return json.dumps(data[0] if len(data) == 1 else data)
    raise ApiError(400, "empty_message", "an A2A message needs a text or data part")


def _parts_of(message: Message) -> Content:
    """An A2A message with files (raw bytes or URLs) as parts, in order."""
    parts: list[str | BinaryPart] = []
    try:
        for part in message.parts:
            if part.HasField("text"):
                parts.append(part.text)
            elif part.HasField("raw"):
                parts.append(
                    file_part(part.raw, part.media_type or None, name=part.filename or None)
                )
            elif part.HasField("url"):
                parts.append(_url_part(part.url, part.media_type, part.filename))
        return coerce_content(parts, "an A2A message")
    except (InvalidContentError, ValueError) as exc:
        raise ApiError(400, "invalid_content", f"an A2A file part: {exc}") from None


def _url_part(url: str, media_type: str, filename: str) -> BinaryPart:
    return part_class(media_type)(url=url, media_type=media_type, name=filename or None)


def answers_of(message: Message, opened: list[Request]) -> dict[str, Answer]:
    """The answers a message on an ``input-required`` task gives to the open requests.

    A data part ``{"answers": {request_id: answer}}`` (an `Answer` as JSON, or true/false)
    answers by id. Otherwise the message's text answers every open request: an approval is
    granted by "yes", "ok", "approve" (and the like) and denied by anything else, with the text
    as the reason (deny by default); any other request gets the text as its data.
    """
    for part in message.parts:
        if part.HasField("data"):
            given = MessageToDict(part.data)
            if isinstance(given, Mapping) and isinstance(given.get("answers"), Mapping):
                return {
                    str(rid): Answer(ok=v) if isinstance(v, bool) else Answer.model_validate(v)
                    for rid, v in given["answers"].items()
                }
    text = "\n".join(p.text for p in message.parts if p.HasField("text")).strip()
    answers: dict[str, Answer] = {}
    for request in opened:
        if request.kind == "approval":
            yes = text.lower().rstrip(".!") in _YES
            answers[request.id] = Answer(ok=yes, reason=None if yes else text or "denied")
        else:
            answers[request.id] = Answer(ok=True, data=text)
    return answers
