from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

from actors.context._messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from actors.context._usage import Usage
from actors.models._model import FINAL_RESULT_TOOL, ModelRequest, ModelResponse, ToolDefinition

__all__ = ["FunctionModel", "Reply", "ScriptedModel", "TestModel", "call"]

Reply: TypeAlias = (
    str | AssistantMessage | ToolCall | Sequence[ToolCall] | ModelResponse | BaseException
)
"""One scripted reply: text, an assistant message, one or more tool calls, a full response, or
an exception to raise."""


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a script: ``call("search", query="pykka")``.

    The id is ``"<name>-<random hex>"``; build a `ToolCall` yourself when ids must be fixed.
    """
    # A random part keeps ids unique across processes: a session continued in a new process
    # builds its script again, and its transcript must not hold the same id twice.
    return ToolCall(id=f"{name}-{uuid.uuid4().hex[:10]}", name=name, arguments=arguments)


def _estimate_tokens(messages: Sequence[Message]) -> int:
    return sum(len(str(getattr(m, "content", "")).split()) + 1 for m in messages)


def _to_response(reply: Reply, request: ModelRequest, model_name: str) -> ModelResponse:
    if isinstance(reply, BaseException):
        raise reply
    if isinstance(reply, ModelResponse):
        return reply
    if isinstance(reply, str):
        message = AssistantMessage(content=reply)
    elif isinstance(reply, AssistantMessage):
        message = reply
    elif isinstance(reply, ToolCall):
        message = AssistantMessage(tool_calls=(reply,))
    else:
        message = AssistantMessage(tool_calls=tuple(reply))
    usage = Usage(
        requests=1,
        input_tokens=_estimate_tokens(request.messages),
        output_tokens=len(message.content.split()) + 2 * len(message.tool_calls),
    )
    finish = "tool_calls" if message.tool_calls else "stop"
    return ModelResponse(message=message, usage=usage, model_name=model_name, finish_reason=finish)


async def _wait(latency: float, request: ModelRequest) -> None:
    """Wait ``latency`` seconds, or less if the run is cancelled (never blocks a thread)."""
    if latency <= 0:
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def release() -> None:
        if not done.done():
            done.set_result(None)

    def on_cancel(_reason: str) -> None:
        loop.call_soon_threadsafe(release)

    unregister = request.cancellation.on_cancel(on_cancel)
    try:
        await asyncio.wait_for(asyncio.shield(done), latency)
    except TimeoutError:
        pass
    finally:
        unregister()


class ScriptedModel:
    """A model that gives a fixed list of replies, in order, and records what it was asked.

    Args:
        replies: The replies, in order: text, `AssistantMessage`, a `ToolCall` (see `call`), a
            list of tool calls, a `ModelResponse`, or an exception to raise.
        latency: Seconds each reply takes (a cancellable wait on the event loop, not a sleep).
        per_agent: Give every agent its own place in the script, so one spec can be reused by
            many agents (children of a fan-out, a simulation's population). The place is read
            from the agent's transcript (one reply per assistant message so far), so a restored
            session, or the same spec in a new runtime, continues where the agent stands.
        name: The model's name.

    Example:
        >>> model = ScriptedModel([call("add", a=1, b=2), "3"])
        >>> len(model.replies)
        2
    """

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        latency: float = 0.0,
        per_agent: bool = False,
        name: str = "scripted",
    ) -> None:
        self.replies = list(replies)
        self.latency = latency
        self.per_agent = per_agent
        self._name = name
        self._lock = threading.Lock()
        self._cursors: dict[str, int] = {}
        self._raised: dict[str, int] = {}
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    def _next(self, request: ModelRequest) -> Reply:
        key = request.agent_id if self.per_agent else ""
        with self._lock:
            self.requests.append(request)
            if self.per_agent:
                # Every reply given became one assistant message, except scripted exceptions.
                answered = sum(isinstance(m, AssistantMessage) for m in request.messages)
                index = answered + self._raised.get(key, 0)
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
            return reply

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Give the next scripted reply."""
        reply = self._next(request)
        await _wait(self.latency, request)
        request.cancellation.raise_if_cancelled()
        return _to_response(reply, request, self._name)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """With no latency, answer on the agent's own thread (see `actors.InlineModel`)."""
        if self.latency > 0:
            return None
        return _to_response(self._next(request), request, self._name)

    def __getstate__(self) -> dict[str, Any]:
        # Ray copies specs to other processes by pickling: a copy starts with its own lock and
        # records its own requests.
        state = dict(self.__dict__)
        del state["_lock"]
        state["requests"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

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

    Example:
        >>> echo = FunctionModel(lambda messages, tools: messages[-1].content)
    """

    def __init__(
        self, function: ModelFunction, *, latency: float = 0.0, name: str = "function"
    ) -> None:
        self.function = function
        self.latency = latency
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return self._name

    def __getstate__(self) -> dict[str, Any]:
        # A copy pickled for another process (Ray) records its own requests.
        return {**self.__dict__, "requests": []}

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the function for a reply."""
        self.requests.append(request)
        reply = self.function(list(request.messages), list(request.tools))
        if inspect.isawaitable(reply):
            reply = await reply
        await _wait(self.latency, request)
        request.cancellation.raise_if_cancelled()
        return _to_response(reply, request, self._name)


class TestModel:
    """A model that calls every tool once, with arguments made from its schema, then answers.

    The answer is the JSON of the tool results by tool name, or ``text`` if given. If the agent
    has an output type, it calls the final-result tool with arguments made from its schema.

    Args:
        text: The final answer, instead of the tool results.
        call_tools: Which tools to call (``"all"`` or a list of names).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, *, text: str | None = None, call_tools: Sequence[str] | str = "all") -> None:
        self.text = text
        self.call_tools = call_tools
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return "test"

    def __getstate__(self) -> dict[str, Any]:
        # A copy pickled for another process (Ray) records its own requests.
        return {**self.__dict__, "requests": []}

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Call the tools on the first request; answer once their results are in."""
        return self._respond(request)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """Answer on the agent's own thread (see `actors.InlineModel`)."""
        return self._respond(request)

    def _respond(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        final = next((t for t in request.tools if t.name == FINAL_RESULT_TOOL), None)
        tools = [
            t
            for t in request.tools
            if t.name != FINAL_RESULT_TOOL
            and (self.call_tools == "all" or t.name in self.call_tools)
        ]
        if not results and tools:
            calls = [
                ToolCall(id=f"test-{i}", name=t.name, arguments=example_arguments(t.parameters))
                for i, t in enumerate(tools)
            ]
            return _to_response(calls, request, self.name)
        if final is not None:
            arguments = example_arguments(final.parameters)
            return _to_response(
                ToolCall(id="test-final", name=final.name, arguments=arguments), request, self.name
            )
        if request.output_schema is not None and self.text is None:
            # The agent wants JSON text: answer with a value made from the schema.
            answer = json.dumps(example_arguments(request.output_schema))
            return _to_response(answer, request, self.name)
        if self.text is not None:
            return _to_response(self.text, request, self.name)
        return _to_response(
            json.dumps({m.tool_name: m.content for m in results}), request, self.name
        )


def example_arguments(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A value that satisfies a (simple) JSON schema: the first enum value, 'a', 0, ..."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example_arguments(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example_arguments(schema[key][0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        required = schema.get("required", [])
        return {
            name: example_arguments(sub, defs)
            for name, sub in schema.get("properties", {}).items()
            if name in required
        }
    if kind == "array":
        minimum = schema.get("minItems", 0)
        item = schema.get("items", {})
        return [example_arguments(item, defs) for _ in range(minimum)]
    return {"string": "a", "integer": 0, "number": 0.0, "boolean": False, "null": None}.get(
        str(kind), "a"
    )
