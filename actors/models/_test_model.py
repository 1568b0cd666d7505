"""`TestModel`: a model that needs no script: it calls every tool once, then answers."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from actors.context._messages import Message, ToolCall, ToolResultMessage, UserMessage
from actors.context._parts import describe_content
from actors.models._latency import Latency, check_latency, latency_of
from actors.models._model import FINAL_RESULT_TOOL, ModelRequest, ModelResponse
from actors.models._test_models import Reply, _to_response
from actors.models._test_support import (
    DEFAULT_HISTORY,
    RequestHistory,
    TranscriptTally,
    check_chunk_size,
    stream_reply,
    wait,
)

__all__ = ["TestModel", "example_arguments"]


class TestModel:
    """A model that calls every tool once a run, with arguments made from its schema, then answers.

    The answer is the JSON of this run's tool results by tool name, or ``text`` if given. If
    the agent has an output type, it calls the final-result tool with arguments made from its
    schema (or, with no tools, answers JSON text made from the schema).

    Args:
        text: The final answer, instead of the tool results.
        call_tools: Which tools to call (``"all"`` or a list of names).
        chunk_size: Stream each reply in pieces of this many characters (see `ScriptedModel`).
        history: How many of the latest requests `requests` keeps (None: all; 0: none).
        latency: Seconds each reply takes, or a function of the request and a seeded
            `random.Random` (see `ScriptedModel`).
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        text: str | None = None,
        call_tools: Sequence[str] | str = "all",
        chunk_size: int | None = None,
        history: int | None = DEFAULT_HISTORY,
        latency: Latency = 0.0,
    ) -> None:
        self.text = text
        self.call_tools = call_tools
        self.chunk_size = check_chunk_size(chunk_size)
        self.latency = check_latency(latency)
        self._rng = random.Random(0)
        self._history = RequestHistory(history)
        self._tally = TranscriptTally()

    @property
    def name(self) -> str:
        """The model's name."""
        return "test"

    @property
    def requests(self) -> list[ModelRequest]:
        """The latest requests received, oldest first (at most ``history`` of them)."""
        return self._history.snapshot()

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Call the tools on a run's first request; answer once their results are in."""
        await wait(self.latency_for(request, self._rng), request)
        return await stream_reply(self._respond(request), request, self.chunk_size)

    def respond_inline(self, request: ModelRequest) -> ModelResponse | None:
        """Answer on the agent's own turn, unless it has a latency (see `actors.InlineModel`)."""
        return self._respond(request) if self.latency == 0.0 else None

    def latency_for(self, request: ModelRequest, rng: random.Random) -> float:
        """The seconds the reply to ``request`` takes (a simulation waits them virtually)."""
        return latency_of(self.latency, request, rng)

    def respond_untimed(self, request: ModelRequest) -> ModelResponse:
        """The reply at once, whatever the latency (a simulation's clock)."""
        return self._respond(request)

    def _respond(self, request: ModelRequest) -> ModelResponse:
        self._history.add(request)
        results = _this_turns_results(request.messages)
        final = next((t for t in request.tools if t.name == FINAL_RESULT_TOOL), None)
        tools = [
            t
            for t in request.tools
            if t.name != FINAL_RESULT_TOOL
            and (self.call_tools == "all" or t.name in self.call_tools)
        ]

        def respond(reply: Reply) -> ModelResponse:
            return _to_response(reply, request, self.name, self._tally)

        if not results and tools:
            calls = [
                ToolCall(id=f"test-{i}", name=t.name, arguments=example_arguments(t.parameters))
                for i, t in enumerate(tools)
            ]
            return respond(calls)
        if final is not None:
            arguments = example_arguments(final.parameters)
            return respond(ToolCall(id="test-final", name=final.name, arguments=arguments))
        if request.output_schema is not None and self.text is None:
            # The agent wants JSON text: answer with a value made from the schema.
            return respond(json.dumps(example_arguments(request.output_schema)))
        if self.text is not None:
            return respond(self.text)
        return respond(json.dumps({m.tool_name: describe_content(m.content) for m in results}))


def _this_turns_results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    """The tool results since the last user message: read from the end, at the turn's cost."""
    results: list[ToolResultMessage] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, ToolResultMessage):
            results.append(message)
    results.reverse()
    return results


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
