"""An agent with a tool, end to end over HTTP against the loopback server.

Reply shapes follow the OpenAI Chat Completions API reference and Anthropic's Messages API
reference and streaming guide, as in the other model tests.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from actors import Agent, RunEnded, Runtime, ToolCallDelta, tool
from actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy

FAST = RetryPolicy(max_attempts=3, initial=0.001, max_delay=0.005, jitter=0)


def openai_tool_call_stream(wire: Any) -> Any:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return wire.event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "local-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    call = {
        "index": 0,
        "id": "call_oslo",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": '},
    }
    return wire.sse(
        [
            chunk({"role": "assistant", "content": "Checking. "}),
            chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
            chunk({}, finish="tool_calls"),
            wire.event(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": "local-model",
                    "choices": [],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
                }
            ),
            wire.event("[DONE]"),
        ]
    )


def openai_final(wire: Any) -> Any:
    return wire.json(
        200,
        {
            "id": "chatcmpl-2",
            "object": "chat.completion",
            "created": 2,
            "model": "local-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Sunny in Oslo."},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 70, "completion_tokens": 5, "total_tokens": 75},
        },
    )


def anthropic_tool_use_stream(wire: Any) -> Any:
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
                "stop_sequence": None,
                "usage": {"input_tokens": 40, "output_tokens": 1},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_oslo",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 12},
        },
        {"type": "message_stop"},
    ]
    return wire.sse([wire.event(event, event=event["type"]) for event in events])


def anthropic_final(wire: Any) -> Any:
    return wire.json(
        200,
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "Sunny in Oslo."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 70, "output_tokens": 5},
        },
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_with_a_tool_over_http(server: Any, wire: Any, provider: str) -> None:
    calls: list[str] = []
    lock = threading.Lock()

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        with lock:
            calls.append(city)
        return "Sunny"

    if provider == "openai":
        # A 500 first: the retry happens before any reply, so the tool still runs once.
        server.script(
            wire.json(500, {"error": {"message": "try again"}}),
            openai_tool_call_stream(wire),
            openai_final(wire),
        )
        model: Any = OpenAIChatModel("local-model", base_url=server.url + "/v1", retry=FAST)
    else:
        server.script(anthropic_tool_use_stream(wire), anthropic_final(wire))
        model = AnthropicModel("claude-test", base_url=server.url, retry=FAST)

    agent = Agent(
        name="weather",
        model=model,
        instructions="Answer with the weather.",
        tools=[get_weather],
        model_settings={"stream": True},
    )
    with Runtime() as rt:
        ref = rt.spawn(agent)
        events = list(ref.run_stream("Weather in Oslo?"))
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    result = ended.result
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]

    assert result.status == "completed"
    assert result.output == "Sunny in Oslo."
    assert calls == ["Oslo"]
    assert result.usage.requests == 2
    assert result.usage.input_tokens == 110
    assert result.usage.output_tokens == 17
    assert any(d.tool_name == "get_weather" for d in deltas)

    # The second request carried the tool call and its result back to the model.
    second = server.received[-1].body
    text = json.dumps(second)
    assert "Sunny" in text
    assert "Answer with the weather." in text  # the instructions reach the provider
    assert ("call_oslo" if provider == "openai" else "toolu_oslo") in text


def test_agent_with_a_model_spec_string(server: Any, wire: Any) -> None:
    server.script(openai_final(wire))
    agent = Agent(name="plain", model=f"openai-compatible:local-model@{server.url}/v1")
    with Runtime() as rt:
        result = rt.spawn(agent).run("Weather?", timeout=30)
    assert result.output == "Sunny in Oslo."
    assert server.received[0].body["model"] == "local-model"
