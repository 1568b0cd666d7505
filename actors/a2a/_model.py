"""`A2AModel`: the "model" of an `A2AAgent`, whose replies come from a remote A2A agent.

One request is one A2A task: the last user message goes to the remote agent as a new task
(``message/stream``); its streamed text comes back as deltas, its final answer (its artifacts,
else its last status message) as the reply. A failed, rejected or cancelled task is a
`RemoteAgentError`, an unreachable or silent agent a `ModelTimeoutError`: the agent loop makes
either the child's error, so the parent's model reads it and the parent lives on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import A2AClientTimeoutError, ClientConfig, create_client
from a2a.helpers import new_text_message
from a2a.types import CancelTaskRequest, Part, Role, SendMessageRequest, StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from actors.context._messages import AssistantMessage, Message, UserMessage
from actors.context._usage import Usage
from actors.exceptions import Cancelled, ModelTimeoutError, RemoteAgentError
from actors.models._model import ModelRequest, ModelResponse, StreamDelta

__all__ = ["A2AModel"]

EVENT_KEY = "actors_event"
"""Metadata key under which an ``actors serve`` door sends its tree's events (see serve)."""

_ENDED = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "canceled",
}
_ASKING = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}

# Best-effort cancels of remote tasks still in flight (held so they are not collected early).
_cancels: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class A2AModel:
    """A model whose every reply is one task of the remote A2A agent at ``url``.

    Attributes:
        url: The remote agent's base URL (its card is at ``/.well-known/agent-card.json``).
        timeout: Seconds one task may take, from the first byte sent to its end.
        connect_timeout: Seconds to connect (and to read the card).
        headers: HTTP headers sent with every request (e.g. ``Authorization``); never shown
            in reprs or logs.
    """

    url: str
    timeout: float = 300.0
    connect_timeout: float = 10.0
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """``a2a:<url>``."""
        return f"a2a:{self.url}"

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send the last user message as a new task; the task's answer as the reply.

        Raises:
            RemoteAgentError: the task failed, was rejected or cancelled, or the agent could
                not be reached or understood.
            ModelTimeoutError: the task did not end within ``timeout`` seconds.
            Cancelled: the run was cancelled (the remote task is cancelled too, best effort).
        """
        request.cancellation.raise_if_cancelled()
        prompt = _prompt_of(request.messages)
        reply = _Reply(request.on_delta)
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        finished = False
        ours = False

        def cancel_task() -> None:
            nonlocal ours
            if not finished:
                ours = True
                task.cancel("remote agent request cancelled")

        def on_cancel(_reason: str) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing in flight
                loop.call_soon_threadsafe(cancel_task)

        unregister = request.cancellation.on_cancel(on_cancel)
        # The stream is read by a task of its own, so that a request cancelled before the
        # remote named its task can still learn the name, and cancel the task by it.
        reader = loop.create_task(self._call(prompt, reply))
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.shield(reader)
        except TimeoutError:
            await self._abandon(reader, reply)
            raise ModelTimeoutError(
                f"the remote agent at {self.url} did not finish its task within {self.timeout:g} s"
            ) from None
        except asyncio.CancelledError:
            # Cancelled by the token or by the host (which cancels the request's task): either
            # way the remote task must not run on for nobody.
            job = loop.create_task(self._abandon(reader, reply))
            _cancels.add(job)
            job.add_done_callback(_cancels.discard)
            if ours and task.uncancel() == 0:
                raise Cancelled(request.cancellation.reason or "cancelled") from None
            raise
        finally:
            finished = True
            unregister()
        text = reply.outcome(self.url)
        return ModelResponse(
            AssistantMessage(content=text),
            usage=Usage(requests=1),
            model_name=self.name,
            finish_reason="stop",
        )

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            headers=dict(self.headers),
            timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
        )

    async def _call(self, prompt: str, reply: _Reply) -> None:
        try:
            await self._stream(prompt, reply)
        finally:
            reply.named.set()  # no task id will come any more

    async def _stream(self, prompt: str, reply: _Reply) -> None:
        async with self._http() as http:
            try:
                client = await create_client(
                    self.url, client_config=ClientConfig(httpx_client=http, streaming=True)
                )
            except (A2AClientTimeoutError, httpx.TimeoutException):
                raise TimeoutError from None
            except Exception as exc:  # the SDK's, httpx's, a card that does not parse
                raise RemoteAgentError(
                    f"the remote agent at {self.url} could not be reached: "
                    f"{type(exc).__name__}: {exc}",
                    self.url,
                ) from exc
            try:
                message = new_text_message(prompt, role=Role.ROLE_USER)
                async for response in client.send_message(SendMessageRequest(message=message)):
                    reply.take(response)
            except (A2AClientTimeoutError, httpx.TimeoutException):
                raise TimeoutError from None
            except Exception as exc:  # a JSON-RPC error, a broken stream, a reply off the spec
                # A model raises model errors only: whatever broke is the remote agent's.
                raise RemoteAgentError(
                    f"the remote agent at {self.url} failed: {type(exc).__name__}: {exc}",
                    self.url,
                ) from exc
            finally:
                await client.close()

    async def _acancel_remote(self, task_id: str | None) -> None:
        """Ask the remote agent to cancel ``task_id`` (best effort, within ``connect_timeout``)."""
        if task_id is None:
            return
        with contextlib.suppress(Exception):  # best effort: the remote may be gone already
            async with asyncio.timeout(self.connect_timeout), self._http() as http:
                config = ClientConfig(httpx_client=http, streaming=False)
                client = await create_client(self.url, client_config=config)
                try:
                    await client.cancel_task(CancelTaskRequest(id=task_id))
                finally:
                    await client.close()

    async def _abandon(self, reader: asyncio.Task[None], reply: _Reply) -> None:
        """Stop reading, and cancel the remote task once its id is known.

        Waits at most ``connect_timeout`` for the id (or for the stream to end without one).
        """
        reply.mute()  # nobody reads this call's text any more
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.connect_timeout):
                await reply.named.wait()
        try:
            await self._acancel_remote(reply.task_id)
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):  # its end is of no interest any more
                await reader


def _prompt_of(messages: Sequence[Message]) -> str:
    """The text of the last user message (what the parent asked the child)."""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


class _Reply:
    """What the remote agent said so far: its task's state, artifacts and status text."""

    def __init__(self, on_delta: Callable[[StreamDelta], None] | None) -> None:
        self._on_delta = on_delta
        self.task_id: str | None = None
        self.named = asyncio.Event()  # set once the task id is known (or never will be)
        self.state: Any = TaskState.TASK_STATE_UNSPECIFIED
        self.artifacts: dict[str, list[str]] = {}
        self.status_text = ""
        self.message_text: str | None = None
        self._events = False  # the remote streams our events: deltas come from them

    def mute(self) -> None:
        """Pass no more text on (the call was abandoned)."""
        self._on_delta = None

    def _delta(self, text: str) -> None:
        if text and self._on_delta is not None:
            self._on_delta(StreamDelta("text", text=text))

    def take(self, response: StreamResponse) -> None:
        """Fold one streamed response into the reply."""
        which = response.WhichOneof("payload")
        if which == "message":
            self.message_text = _text_of(response.message.parts)
            self._delta(self.message_text)
        elif which == "task":
            task = response.task
            self.task_id = task.id
            self.named.set()
            self.state = task.status.state
            if task.status.HasField("message"):
                self.status_text = _text_of(task.status.message.parts)
            self.artifacts = {a.artifact_id: [_text_of(a.parts)] for a in task.artifacts}
        elif which == "status_update":
            update = response.status_update
            self.task_id = update.task_id
            self.named.set()
            self.state = update.status.state
            if update.status.HasField("message"):
                self.status_text = _text_of(update.status.message.parts)
            if EVENT_KEY in update.metadata:
                self._events = True
                event = MessageToDict(update.metadata).get(EVENT_KEY, {})
                # The remote root's own text (its path is just itself), as this child's text.
                if event.get("kind") == "text_delta" and len(event.get("path", ())) <= 1:
                    self._delta(str(event.get("text", "")))
        elif which == "artifact_update":
            update = response.artifact_update
            self.task_id = update.task_id
            self.named.set()
            text = _text_of(update.artifact.parts)
            chunks = self.artifacts.setdefault(update.artifact.artifact_id, [])
            if not update.append:
                chunks.clear()
            chunks.append(text)
            if not self._events:
                self._delta(text)

    def outcome(self, url: str) -> str:
        """The answer of a finished task (or a direct message).

        Raises:
            RemoteAgentError: the task failed, was rejected or cancelled, or never ended.
        """
        if self.message_text is not None and self.task_id is None:
            return self.message_text
        if self.state == TaskState.TASK_STATE_COMPLETED:
            answer = "\n".join("".join(chunks) for chunks in self.artifacts.values())
            return answer or self.status_text or (self.message_text or "")
        if self.state in _ASKING:
            what = "input" if self.state == TaskState.TASK_STATE_INPUT_REQUIRED else "auth"
            return f"The remote agent needs {what} to go on: {self.status_text}".rstrip(": ")
        ended = _ENDED.get(self.state)
        if ended is not None:
            raise RemoteAgentError(
                f"the remote agent at {url} ended its task {ended}"
                + (f": {self.status_text}" if self.status_text else ""),
                url,
                ended,
            )
        raise RemoteAgentError(
            f"the remote agent at {url} stopped answering before its task ended "
            f"(state {TaskState.Name(self.state)})",
            url,
        )


def _text_of(parts: Iterable[Part]) -> str:
    """The text of a message's or an artifact's parts (data parts as JSON), one per line."""
    out = []
    for part in parts:
        if part.HasField("text"):
            out.append(part.text)
        elif part.HasField("data"):
            out.append(json.dumps(MessageToDict(part.data)))
    return "\n".join(out)
