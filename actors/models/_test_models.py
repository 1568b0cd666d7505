"""Models for tests and simulations: scripted replies, a function, or a tool-exercising robot.

They need no network, answer at once (or after a cancellable wait), stream in pieces when
asked, and keep a bounded history of what they were asked (see `_test_support`).
"""

from __future__ import annotations

import inspect
import random
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeAlias

from actors.context._messages import (
    AssistantMessage,
    Message,
    ToolCall,
)
from actors.context._usage import usage_of
from actors.models._latency import Latency, check_latency, latency_of
from actors.models._model import ModelRequest, ModelResponse, ToolDefinition
from actors.models._test_support import (
    DEFAULT_HISTORY,
    RequestHistory,
    TranscriptTally,
    call_off_loop,
    check_chunk_size,
    stream_reply,
    wait,
)

__all__ = [
    "FunctionModel",
    "Latency",
    "Reply",
    "ScriptedModel",
    "call",
    "seed_call_ids",
]

Reply: TypeAlias = (
    str | AssistantMessage | ToolCall | Sequence[ToolCall] | ModelResponse | BaseException
)
"""One scripted reply: text, an assistant message, one or more tool calls, a full response, or
an exception to raise."""


_call_ids: random.Random | None = None  # set by seed_call_ids (a simulation's seed)


def seed_call_ids(seed: int | str | None) -> None:
    """Make the ids of `call` come from ``seed`` from now on (None: random again).

    `actors.sim.Simulation` seeds them with its own seed, so scripts built after it was made
    hold the same ids in every process.
    """
    global _call_ids
    _call_ids = None if seed is None else random.Random(f"actors-call-ids:{seed}")


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a script: ``call("search", query="pykka")``.

    The id is ``"<name>-<random hex>"`` (from the seed of `seed_call_ids`, if one was set);
    build a `ToolCall` yourself when ids must be fixed.
    """
    # A random part keeps ids unique across processes: a session continued in a new process
    # builds its script again, and its transcript must not hold the same id twice.
    source = _call_ids
    suffix = uuid.uuid4().hex[:10] if source is None else f"{source.getrandbits(40):010x}"
    return ToolCall(id=f"{name}-{suffix}", name=name, arguments=arguments)


def _to_response(
    reply: Reply, request: ModelRequest, model_name: str, tally: TranscriptTally
) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    tokens = tally.count(request.agent_id, request.messages).tokens
    return _response(_message_of(reply), tokens, model_name)


def _message_of(reply: str | AssistantMessage | ToolCall | Sequence[ToolCall]) -> AssistantMessage:
    if isinstance(reply, str):
        return AssistantMessage(content=reply)
    if isinstance(reply, AssistantMessage):
        return reply
    if isinstance(reply, ToolCall):
        return AssistantMessage(tool_calls=(reply,))
    return AssistantMessage(tool_calls=tuple(reply))


def _response(message: AssistantMessage, input_tokens: int, model_name: str) -> ModelResponse:
    output_tokens = len(message.content.split()) + 2 * len(message.tool_calls)
    # Counts of a test model: valid by construction, so not validated again.
    usage = usage_of(1, input_tokens, output_tokens, 0)
    finish = "tool_calls" if message.tool_calls else "stop"
    return ModelResponse(message, usage, model_name, finish)


class _Scripted:
    """A scripted reply's message, and its responses (immutable) kept by input tokens.

    A few hundred at most: a population of agents on one script asks with transcripts of the
    same few sizes.
    """

    __slots__ = ("message", "responses")

    def __init__(self, message: AssistantMessage) -> None:
        self.message = message
        self.responses: dict[tuple[int, str], ModelResponse] = {}

    def response(self, input_tokens: int, model_name: str) -> ModelResponse:
        key = (input_tokens, model_name)
        response = self.responses.get(key)
        if response is None:
            response = _response(self.message, input_tokens, model_name)
            if len(self.responses) < _RESPONSES_KEPT:
                self.responses[key] = response
        return response


_RESPONSES_KEPT = 512


class ScriptedModel:
    """A model that gives a fixed list of replies, in order, and records what it was asked.

    Args:
        replies: The replies, in order: text, `AssistantMessage`, a `ToolCall` (see `call`), a
            list of tool calls, a `ModelResponse`, or an exception to raise.
        latency: Seconds each reply takes (a cancellable wait on the event loop, not a sleep), or
            a function of the request and a seeded `random.Random` returning them. A
            `Simulation` waits them on its virtual clock.
        per_agent: Give every agent its own place in the script, so one spec can be reused by
            many agents (children of a fan-out, a simulation's population). The place is read
            from the agent's transcript (one reply per assistant message so far), so a restored
            session, or the same spec in a new runtime, continues where the agent stands.
        name: The model's name.
        chunk_size: Stream each reply to ``request.on_delta`` in pieces of this many characters
            (text, then each tool call's arguments as JSON), as a streaming provider would,
            whenever the host asks for pieces (``ref.run_stream``). None (the default): never.
        history: How many of the latest requests `requests` keeps (None: every one, which
            grows without bound in a long session; 0: none).

    Example:
        >>> model = ScriptedModel([call("add", a=1, b=2), "3"])
        >>> len(model.replies)
        2
    """

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        latency: Latency = 0.0,
        per_agent: bool = False,
        name: str = "scripted",
        chunk_size: int | None = None,
        history: int | None = DEFAULT_HISTORY,
    ) -> None:
        self.replies = list(replies)
        self.latency = check_latency(latency)
        self._rng = random.Random(0)
        self.per_agent = per_agent
        self.chunk_size = check_chunk_size(chunk_size)
        self._name = name
        self._lock = threading.Lock()
        self._cursors: dict[str, int] = {}
        self._raised: dict[str, int] = {}
        self._history = RequestHistory(history)
        self._tally = TranscriptTally()
        # id of a reply -> (the reply, its message); the reply is kept so its id stays its own
        self._messages: dict[int, tuple[Reply, _Scripted]] = {}

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def requests(self) -> list[ModelRequest]:
        """The latest requests received, oldest first (at most ``history`` of them)."""
        return self._history.snapshot()

    def __getstate__(self) -> dict[str, Any]:
        # Ray copies specs to other processes by pickling: a copy gets a lock of its own.
        state = dict(self.__dict__)
        del state["_lock"]
        state["_messages"] = {}  # keyed by ids of this process's objects
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _next(self, request: ModelRequest) -> tuple[Reply, int]:
        """The reply to ``request`` and the tokens of its transcript (estimated)."""
        key = request.agent_id if self.per_agent else ""
        self._history.add(request)
        # Counted outside the lock, once a request: only what is new since the agent's last one.
        counted = self._tally.count(request.agent_id, request.messages)
        with self._lock:
            if self.per_agent:
                # Every reply given became one assistant message, except scripted exceptions.
                index = counted.assistant_messages + self._raised.get(key, 0)
            else:
                index = self._cursors.get(key, 0)
            if index >= len(self.replies):
                raise IndexError(
                    f"ScriptedModel ran out of replies after {len(self.replies)} "
                    f"(agent {request.agent_id!r}); add more replies to the script"
                )
            self._cursors[key] = index + 1
            reply = self.replies[index]
            if isinstance(reply, BaseException):
                self._raised[key] = self._raised.get(key, 0) + 1
            return reply, counted.tokens

    def _respond(self, reply: Reply, tokens: int) -> ModelResponse:
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            return reply
        # One message per scripted reply, shared by every agent that is given it (messages are
        # immutable): a population of agents on one script holds one copy of each.
        cached = self._messages.get(id(reply))
        if cached is None or cached[0] is not reply:
            cached = self._messages[id(reply)] = (reply, _Scripted(_message_of(reply)))
        return cached[1].response(tokens, self._name)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Give the next scripted reply (streamed in pieces when ``chunk_size`` is set)."""
        reply, tokens = self._next(request)
        await wait(self.latency_for(request, self._rng), request)
        request.cancellation.raise_if_cancelled()
        return await stream_reply(self._respond(reply, tokens), request, self.chunk_size)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """With no latency, answer on the agent's own turn (see `actors.InlineModel`).

        A host that wants the reply streamed (``on_delta``) asks `request` instead.
        """
        if self.latency != 0.0:
            return None
        return self._respond(*self._next(request))

    def latency_for(self, request: ModelRequest, rng: random.Random) -> float:
        """The seconds the reply to ``request`` takes (a simulation waits them virtually)."""
        return latency_of(self.latency, request, rng)

    def respond_untimed(self, request: ModelRequest) -> ModelResponse:
        """The reply to ``request`` at once, whatever the latency (a simulation's clock)."""
        return self._respond(*self._next(request))

    @property
    def remaining(self) -> int:
        """Replies not yet given (with ``per_agent``, the fewest any agent has left)."""
        with self._lock:
            used = max(self._cursors.values(), default=0)
        return len(self.replies) - used

    def assert_complete(self) -> None:
        """Fail (AssertionError) unless every reply was given."""
        with self._lock:
            cursors = dict(self._cursors) or {"": 0}
        short = {k or "(shared)": v for k, v in cursors.items() if v != len(self.replies)}
        assert not short, (
            f"ScriptedModel gave fewer replies than scripted ({len(self.replies)}): {short}"
        )


ModelFunction: TypeAlias = Callable[
    [list[Message], list[ToolDefinition]],
    "Reply | Awaitable[Reply]",
]


class FunctionModel:
    """A model whose replies come from a function of the messages and tool definitions.

    The function may be sync or async, and returns anything a `ScriptedModel` script holds.
    A sync function runs on a thread of its own, never on the runtime's event loop: a slow one
    delays no other agent, and the agent's ``model_timeout`` cuts it (the thread is abandoned,
    and never keeps the process from exiting). An async function runs on the event loop and
    must not block it.

    Args:
        function: ``function(messages, tools)`` returns the reply (or an awaitable of it).
        latency: Seconds each reply takes (a cancellable wait, not a sleep).
        name: The model's name.
        chunk_size: Stream each reply in pieces of this many characters (see `ScriptedModel`).
        history: How many of the latest requests `requests` keeps (None: all; 0: none).

    Example:
        >>> echo = FunctionModel(lambda messages, tools: messages[-1].content)
    """

    def __init__(
        self,
        function: ModelFunction,
        *,
        latency: Latency = 0.0,
        name: str = "function",
        chunk_size: int | None = None,
        history: int | None = DEFAULT_HISTORY,
    ) -> None:
        self.function = function
        self.latency = check_latency(latency)
        self._rng = random.Random(0)
        self.chunk_size = check_chunk_size(chunk_size)
        self._name = name
        self._history = RequestHistory(history)
        self._tally = TranscriptTally()

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    @property
    def requests(self) -> list[ModelRequest]:
        """The latest requests received, oldest first (at most ``history`` of them)."""
        return self._history.snapshot()

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the function for a reply."""
        self._history.add(request)
        messages, tools = list(request.messages), list(request.tools)
        if inspect.iscoroutinefunction(self.function):
            reply: Any = self.function(messages, tools)
        else:
            reply = await call_off_loop(self.function, messages, tools)
        if inspect.isawaitable(reply):
            reply = await reply
        await wait(self.latency_for(request, self._rng), request)
        request.cancellation.raise_if_cancelled()
        response = _to_response(reply, request, self._name, self._tally)
        return await stream_reply(response, request, self.chunk_size)

    def latency_for(self, request: ModelRequest, rng: random.Random) -> float:
        """The seconds the reply to ``request`` takes (a simulation waits them virtually)."""
        return latency_of(self.latency, request, rng)

    def respond_untimed(
        self, request: ModelRequest
    ) -> ModelResponse | Coroutine[Any, Any, ModelResponse]:
        """The reply at once, whatever the latency (a coroutine if the function is async)."""
        self._history.add(request)
        reply = self.function(list(request.messages), list(request.tools))
        if inspect.isawaitable(reply):
            waiting = reply

            async def finish() -> ModelResponse:
                return _to_response(await waiting, request, self._name, self._tally)

            return finish()
        return _to_response(reply, request, self._name, self._tally)
