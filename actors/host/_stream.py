"""What ``ref.run_stream`` yields: typed events of a whole tree's run, as they happen.

Each event names the agent it comes from and its path from the root (``("lead",
"lead-sub-1")``), so a caller can show a child's text under its own heading. The events are
built from the agents' logs and the models' streamed pieces; nothing here is stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from actors._text import clean_text
from actors.context._events import Event
from actors.context._parts import coerce_content, describe_content
from actors.context._result import RunResult
from actors.context._suspension import Request
from actors.exceptions import ActorsError
from actors.models._model import StreamDelta

__all__ = [
    "RunEnded",
    "StreamEvent",
    "SubagentFinished",
    "SubagentSpawned",
    "Suspended",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TreeStream",
    "to_stream_events",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Base:
    agent_id: str
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(_Base):
    """A piece of an agent's reply text, as the model streams it.

    Attributes:
        agent_id: The agent whose model is replying.
        path: The agent ids from the root down to it.
        text: The new text.
    """

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(_Base):
    """A piece of a tool call's arguments as the model streams them.

    Attributes:
        index: Which call of the reply it belongs to.
        text: The new piece of the arguments' JSON.
        tool_call_id: The call's id (on the first piece).
        tool_name: The tool's name (on the first piece).
    """

    index: int
    text: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(_Base):
    """A tool call was logged and is starting.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool.
        arguments: The arguments it runs with.
    """

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished(_Base):
    """A tool call's result entered the transcript.

    Attributes:
        tool_call_id: The call's id.
        tool_name: The tool.
        content: What the model reads.
        is_error: Whether it is an error result.
    """

    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentSpawned(_Base):
    """The agent started a child (``agent_id`` is the parent's).

    Attributes:
        child_id: The child's id.
        name: The subagent's name.
        task: Its task.
    """

    child_id: str
    name: str
    task: str
    kind: Literal["subagent_spawned"] = "subagent_spawned"


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentFinished(_Base):
    """A child of the agent (``agent_id``) ended: streamed when it ends.

    In a fan-out it comes as each child ends, while its siblings still run; the child's
    result enters the parent's transcript (a `ToolCallFinished`) once the step's calls have
    all finished, in call order.

    Attributes:
        child_id: The child's id.
        status: How it ended (``completed``, ``failed``, ``cancelled``); a child past its
            timeout is ``failed``, here and in ``ref.tree()``.
    """

    child_id: str
    status: str
    kind: Literal["subagent_finished"] = "subagent_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspended(_Base):
    """The agent parked a call on a request for the host.

    Attributes:
        request: The request (answer it with ``ref.resume`` once the run has suspended).
    """

    request: Request
    kind: Literal["suspended"] = "suspended"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEnded(_Base):
    """The streamed run ended: the last event of a stream.

    Attributes:
        result: The run's result (completed, suspended or cancelled), or None if it failed.
        error: The run's error, or None.
    """

    result: RunResult[Any] | None = None
    error: ActorsError | None = field(default=None)
    kind: Literal["run_ended"] = "run_ended"


StreamEvent = (
    TextDelta
    | ToolCallDelta
    | ToolCallStarted
    | ToolCallFinished
    | SubagentSpawned
    | SubagentFinished
    | Suspended
    | RunEnded
)
"""Everything ``ref.run_stream`` yields; tell them apart by type or by ``kind``."""


def to_stream_events(
    agent_id: str, path: tuple[str, ...], item: Event | StreamDelta
) -> list[StreamEvent]:
    """The stream events one log event (or streamed piece) of an agent stands for."""
    if isinstance(item, StreamDelta):
        # A piece straight from a provider: the text rule here, as for the reply it builds.
        text = item.text if item.text.isascii() else clean_text(item.text)
        if item.kind == "text":
            return [TextDelta(agent_id=agent_id, path=path, text=text)] if text else []
        call_id, name = item.tool_call_id, item.tool_name
        return [
            ToolCallDelta(
                agent_id=agent_id,
                path=path,
                index=item.index,
                text=text,
                tool_call_id=call_id if call_id is None else clean_text(call_id),
                tool_name=name if name is None else clean_text(name),
            )
        ]
    data = item.data
    kind = item.type
    if kind == "tool_call":
        return [
            ToolCallStarted(
                agent_id=agent_id,
                path=path,
                tool_call_id=data["tool_call_id"],
                tool_name=data["name"],
                arguments=data.get("arguments", {}),
            )
        ]
    if kind == "tool_result":
        return [
            ToolCallFinished(
                agent_id=agent_id,
                path=path,
                tool_call_id=data.get("tool_call_id", ""),
                tool_name=data.get("tool_name", ""),
                content=_shown(data.get("content", "")),
                is_error=bool(data.get("is_error", False)),
            )
        ]
    if kind == "subagent_spawned":
        return [
            SubagentSpawned(
                agent_id=agent_id,
                path=path,
                child_id=data["child_id"],
                name=data.get("name", ""),
                task=data.get("task", ""),
            )
        ]
    if kind == "subagent_finished":
        return [
            SubagentFinished(
                agent_id=agent_id,
                path=path,
                child_id=data.get("child_id", ""),
                status=str(data.get("status", "")),
            )
        ]
    if kind == "suspended":
        return [
            Suspended(agent_id=agent_id, path=path, request=Request.model_validate(data["request"]))
        ]
    return []


_DONE = object()


class TreeStream:
    """The receiving end of one streamed run, fed from the agents' threads.

    Made for one reader, chosen up front: a thread iterating (``iter``), or a coroutine on the
    asyncio loop given here (``aiter``), to which events are passed with
    ``call_soon_threadsafe`` so the loop never blocks.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._sync: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._async: asyncio.Queue[Any] | None = asyncio.Queue() if loop is not None else None

    def _push(self, item: Any) -> None:
        if self._loop is None:
            self._sync.put(item)
        else:
            assert self._async is not None
            with contextlib.suppress(RuntimeError):  # the reader's loop is closed: no reader
                self._loop.call_soon_threadsafe(self._async.put_nowait, item)

    def put(self, event: StreamEvent) -> None:
        """Hand one event to the reader (from any thread)."""
        self._push(event)

    def end(self, event: RunEnded) -> None:
        """The run ended: its last event."""
        self._push(event)
        self._push(_DONE)

    def __iter__(self) -> Iterator[StreamEvent]:
        while True:
            item = self._sync.get()
            if item is _DONE:
                return
            yield item

    async def aiter(self) -> AsyncIterator[StreamEvent]:
        """The events, awaited on the loop this stream was made for."""
        assert self._async is not None, "this stream was made for a thread: iterate it"
        while True:
            item = await self._async.get()
            if item is _DONE:
                return
            yield item


def _shown(content: Any) -> str:
    """A logged tool result's content as text: parts as placeholders, never their bytes."""
    if isinstance(content, str):
        return content
    try:
        return describe_content(coerce_content(content))
    except ActorsError:
        return "[content that is not text or parts]"
