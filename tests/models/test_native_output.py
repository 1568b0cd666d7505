"""Native structured output over HTTP, against the loopback server: opt-in, per provider.

Wire shapes follow OpenAI's structured outputs guide (``response_format`` of type
``json_schema``; ``strict`` on a function) and Anthropic's tool use guide (``tool_choice`` of
type ``tool`` or ``any``; ``tool_use`` content blocks), as in the other model tests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from actors import Agent, ModelSettings, Runtime, tool
from actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy
from actors.models._native import native_schema

NATIVE = ModelSettings(native_output=True)
ONCE = RetryPolicy(max_attempts=1)


class City(BaseModel):
    name: str
    population: int


class Draft(BaseModel):
    title: str
    subtitle: str | None = None


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 1000"


def openai_text(wire: Any, content: str) -> Any:
    return wire.json(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "local-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        },
    )


def openai_call(wire: Any, name: str, arguments: dict[str, Any]) -> Any:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return wire.json(
        200,
        {
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "created": 1,
            "model": "local-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
    )


def anthropic_tool_use(wire: Any, name: str, arguments: dict[str, Any]) -> Any:
    return wire.json(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )


def anthropic_tool_use_stream(wire: Any, name: str, arguments: dict[str, Any]) -> Any:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return wire.sse([wire.event(event, event=event["type"]) for event in events])


def run(agent: Agent[Any], prompt: str = "A city?") -> Any:
    with Runtime() as runtime:
        return runtime.spawn(agent).run(prompt, timeout=30).output


def openai(server: Any, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel("local-model", base_url=server.url + "/v1", retry=ONCE, **options)


# -- OpenAI -------------------------------------------------------------------------------------


def test_openai_native_output_sends_a_strict_json_schema_response_format(
    server: Any, wire: Any
) -> None:
    server.script(openai_text(wire, '{"name": "Lyon", "population": 500000}'))
    agent = Agent("geo", model=openai(server), output_type=City, model_settings=NATIVE)
    assert run(agent) == City(name="Lyon", population=500_000)
    response_format = server.received[0].body["response_format"]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]
    assert schema["name"] == "final_result"
    assert schema["strict"] is True
    assert schema["schema"]["additionalProperties"] is False
    assert schema["schema"]["required"] == ["name", "population"]


def test_a_non_object_answer_is_wrapped_on_the_wire_and_unwrapped_for_the_agent(
    server: Any, wire: Any
) -> None:
    server.script(openai_text(wire, '{"result": [3, 1, 2]}'))
    agent = Agent("nums", model=openai(server), output_type=list[int], model_settings=NATIVE)
    assert run(agent) == [3, 1, 2]
    schema = server.received[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["result"] == {"items": {"type": "integer"}, "type": "array"}
    assert schema["required"] == ["result"]


def test_a_type_strict_mode_cannot_describe_is_sent_unstrict(server: Any, wire: Any) -> None:
    server.script(openai_text(wire, '{"title": "Hi"}'))
    model = openai(server, settings=NATIVE)  # the model's own settings: its server supports it
    assert run(Agent("w", model=model, output_type=Draft)) == Draft(title="Hi")
    assert server.received[0].body["response_format"]["json_schema"]["strict"] is False


def test_openai_native_output_for_a_tools_agent_is_a_strict_final_result_tool(
    server: Any, wire: Any
) -> None:
    server.script(openai_call(wire, "final_result", {"name": "Lyon", "population": 5}))
    agent = Agent(
        "geo", model=openai(server), tools=[lookup], output_type=City, model_settings=NATIVE
    )
    assert run(agent) == City(name="Lyon", population=5)
    body = server.received[0].body
    assert body["tool_choice"] == "required"
    final = next(t["function"] for t in body["tools"] if t["function"]["name"] == "final_result")
    plain = next(t["function"] for t in body["tools"] if t["function"]["name"] == "lookup")
    assert final["strict"] is True
    assert "strict" not in plain  # the user's own tools are left as they are
    assert "response_format" not in body


def test_without_native_output_nothing_of_it_is_sent(server: Any, wire: Any) -> None:
    server.script(
        openai_text(wire, '{"name": "Lyon", "population": 1}'),
        openai_call(wire, "final_result", {"name": "Lyon", "population": 1}),
    )
    run(Agent("geo", model=openai(server), output_type=City))
    run(Agent("geo", model=openai(server), tools=[lookup], output_type=City))
    text_mode, tool_mode = (received.body for received in server.received)
    assert "response_format" not in text_mode
    assert "tool_choice" not in tool_mode
    assert all("strict" not in t["function"] for t in tool_mode["tools"])


def test_a_server_refusing_native_output_fails_the_run_with_its_error(
    server: Any, wire: Any
) -> None:
    from actors.exceptions import ModelHTTPError, RunFailedError

    server.script(wire.json(400, {"error": {"message": "response_format is not supported"}}))
    agent = Agent("geo", model=openai(server), output_type=City, model_settings=NATIVE)
    with pytest.raises(RunFailedError, match="response_format is not supported") as info:
        run(agent)
    assert isinstance(info.value.__cause__, ModelHTTPError)


# -- Anthropic ----------------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_anthropic_native_output_forces_the_final_result_tool(
    server: Any, wire: Any, streamed: bool
) -> None:
    reply = anthropic_tool_use_stream if streamed else anthropic_tool_use
    server.script(reply(wire, "final_result", {"result": 42}))
    model = AnthropicModel("claude-test", base_url=server.url, retry=ONCE)
    settings = ModelSettings(native_output=True, stream=streamed)
    with Runtime() as runtime:
        agent = Agent("n", model=model, output_type=int, model_settings=settings)
        result = runtime.spawn(agent).run("A number?", timeout=30)
    assert result.output == 42
    body = server.received[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "final_result"}
    (final,) = body["tools"]
    assert final["input_schema"] == native_schema({"type": "integer"}).schema
    # The transcript holds the answer as text, as without native output.
    assert result.messages[-1].content == "42"
    assert result.messages[-1].tool_calls == ()


def test_anthropic_native_output_for_a_tools_agent_requires_some_tool(
    server: Any, wire: Any
) -> None:
    server.script(anthropic_tool_use(wire, "final_result", {"name": "Lyon", "population": 5}))
    model = AnthropicModel("claude-test", base_url=server.url, retry=ONCE)
    agent = Agent("geo", model=model, tools=[lookup], output_type=City, model_settings=NATIVE)
    assert run(agent) == City(name="Lyon", population=5)
    assert server.received[0].body["tool_choice"] == {"type": "any"}


# -- the schema ---------------------------------------------------------------------------------


def test_native_schemas_close_every_object_and_keep_definitions_at_the_root() -> None:
    class Place(BaseModel):
        city: City
        tags: list[str]

    shaped = native_schema(Place.model_json_schema())
    assert shaped.strict
    assert not shaped.wrapped
    assert shaped.schema["$defs"]["City"]["additionalProperties"] is False
    wrapped = native_schema({"$defs": {"C": {"type": "string"}}, "$ref": "#/$defs/C"})
    assert wrapped.wrapped
    assert wrapped.schema["$defs"] == {"C": {"type": "string"}}
    assert wrapped.schema["properties"]["result"] == {"$ref": "#/$defs/C"}
    assert not native_schema({"type": "object", "additionalProperties": {"type": "int"}}).strict
