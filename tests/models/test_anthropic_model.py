"""AnthropicModel's wire mapping, checked with httpx.MockTransport.

Fixture shapes follow Anthropic's API reference for the Messages API (POST /v1/messages:
request body, the ``message`` object with ``text`` and ``tool_use`` content blocks, ``usage``
with cache counts, error objects) and its "Streaming messages" guide (``message_start``,
``content_block_start``, ``ping``, ``content_block_delta`` with ``text_delta`` and
``input_json_delta``, ``content_block_stop``, ``message_delta`` with cumulative ``usage``,
``message_stop``, and ``error`` events).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from actors.context._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from actors.context._usage import Usage
from actors.exceptions import (
    ModelAuthenticationError,
    ModelHTTPError,
    UnexpectedModelResponse,
    UserError,
)
from actors.models import INVALID_ARGUMENTS_KEY, AnthropicModel, RetryPolicy
from actors.models._model import ModelRequest, ModelResponse, StreamDelta, ToolDefinition

FAST = RetryPolicy(max_attempts=3, initial=0.001, max_delay=0.002, jitter=0)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather of a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)

# The message object (Anthropic API reference), with text and a tool_use block.
TOOL_REPLY = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "text", "text": "I'll check."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"city": "Paris"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 472,
        "cache_creation_input_tokens": 10,
        "cache_read_input_tokens": 100,
        "output_tokens": 91,
    },
}


def text_reply(text: str = "Hello!", stop: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 6},
    }


def sse(*events: dict[str, Any]) -> bytes:
    return "".join(
        f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n"
        for event in events
    ).encode()


# A streamed reply with text and a tool call, as in the streaming guide's tool-use example.
STREAM = sse(
    {
        "type": "message_start",
        "message": {
            "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 472, "output_tokens": 2},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Okay"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ", é"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "input": {},
        },
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Pa'},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": 'ris"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 89},
    },
    {"type": "message_stop"},
)


class Recorder:
    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)


def call(recorder: Recorder, request: ModelRequest, **options: Any) -> ModelResponse:
    async def main() -> ModelResponse:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recorder)) as client:
            options.setdefault("api_key", "sk-ant-test")
            model = AnthropicModel("claude-sonnet-4-5", http_client=client, retry=FAST, **options)
            return await model.request(request)

    return asyncio.run(main())


def ask(*messages: Any, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [UserMessage(content="hi")], **fields)


def streamed(content: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content)


def test_request_body_headers_and_turns() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    transcript = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris and Rome?"),
        AssistantMessage(
            content="Checking.",
            tool_calls=(
                ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
                ToolCall(id="toolu_2", name="get_weather", arguments={"city": "Rome"}),
            ),
        ),
        ToolResultMessage(tool_call_id="toolu_1", tool_name="get_weather", content="Sunny"),
        ToolResultMessage(
            tool_call_id="toolu_2", tool_name="get_weather", content="boom", is_error=True
        ),
        SystemMessage(content="Answer in French."),
        UserMessage(content="And tomorrow?"),
    ]
    call(
        recorder,
        ask(
            *transcript,
            tools=[WEATHER],
            settings={"temperature": 0.3, "top_p": 0.9, "stop": ["END"], "seed": 4},
        ),
    )

    sent = recorder.requests[0]
    assert sent.url == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert recorder.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        # Cache breakpoints by default: the system prompt and the last tool.
        "system": [
            {
                "type": "text",
                "text": "Be brief.\n\nAnswer in French.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"city": "Rome"},
                    },
                ],
            },
            {
                # Both results of the step in one user turn, then the user's next words.
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "boom",
                        "is_error": True,
                    },
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather of a city.",
                "input_schema": WEATHER.parameters,
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "temperature": 0.3,
        "top_p": 0.9,
        "stop_sequences": ["END"],
    }


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        ("get_weather", None, {"type": "tool", "name": "get_weather"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, None, None),
    ],
)
def test_tool_choice(choice: str | None, parallel: bool | None, expected: Any) -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    settings: dict[str, Any] = {}
    if choice is not None:
        settings["tool_choice"] = choice
    if parallel is not None:
        settings["parallel_tool_calls"] = parallel
    call(recorder, ask(tools=[WEATHER], settings=settings))  # type: ignore[arg-type]
    assert recorder.body.get("tool_choice") == expected


def test_tool_choice_naming_no_tool_is_a_caller_mistake() -> None:
    with pytest.raises(UserError, match="nope"):
        call(Recorder(), ask(tools=[WEATHER], settings={"tool_choice": "nope"}))


def test_max_tokens_setting_and_extra_body() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(settings={"max_tokens": 100, "extra_body": {"metadata": {"user_id": "u"}}}))
    assert recorder.body["max_tokens"] == 100
    assert recorder.body["metadata"] == {"user_id": "u"}


def test_reply_with_text_tool_use_and_usage() -> None:
    response = call(Recorder(httpx.Response(200, json=TOOL_REPLY)), ask(tools=[WEATHER]))
    assert response.message == AssistantMessage(
        content="I'll check.",
        tool_calls=(
            ToolCall(
                id="toolu_01A09q90qw90lq917835lq9", name="get_weather", arguments={"city": "Paris"}
            ),
        ),
    )
    # Cached input counts as input, and the cache's share of it is told apart.
    assert response.usage == Usage(
        requests=1,
        input_tokens=582,
        output_tokens=91,
        cache_read_tokens=100,
        cache_write_tokens=10,
    )
    assert response.finish_reason == "tool_calls"
    assert response.model_name == "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_stop_reasons(stop: str, finish: str) -> None:
    response = call(Recorder(httpx.Response(200, json=text_reply(stop=stop))), ask())
    assert response.finish_reason == finish


def test_stream_assembles_text_and_tool_use_and_reports_deltas() -> None:
    recorder = Recorder(streamed(STREAM))
    deltas: list[StreamDelta] = []
    response = call(recorder, ask(tools=[WEATHER], on_delta=deltas.append))

    assert recorder.body["stream"] is True
    assert deltas == [
        StreamDelta(kind="text", text="Okay"),
        StreamDelta(kind="text", text=", é"),
        StreamDelta(
            kind="tool_call",
            index=0,
            tool_call_id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            tool_name="get_weather",
        ),
        StreamDelta(kind="tool_call", text="", index=0),
        StreamDelta(kind="tool_call", text='{"city": "Pa', index=0),
        StreamDelta(kind="tool_call", text='ris"}', index=0),
    ]
    assert response.message == AssistantMessage(
        content="Okay, é",
        tool_calls=(
            ToolCall(
                id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather", arguments={"city": "Paris"}
            ),
        ),
    )
    assert response.usage == Usage(requests=1, input_tokens=472, output_tokens=89)
    assert response.finish_reason == "tool_calls"


def test_streamed_tool_input_that_is_not_json_is_kept_for_the_loop_to_report() -> None:
    stream = STREAM.replace(b'ris\\"}', b"ris")  # the closing quote and brace never come
    assert stream != STREAM
    response = call(Recorder(streamed(stream)), ask(on_delta=lambda delta: None))
    (only,) = response.message.tool_calls
    assert only.arguments == {INVALID_ARGUMENTS_KEY: '{"city": "Paris'}


def test_overloaded_error_event_before_any_delta_is_retried() -> None:
    overloaded = sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    recorder = Recorder(streamed(overloaded), streamed(STREAM))
    response = call(recorder, ask(on_delta=lambda delta: None))
    assert len(recorder.requests) == 2
    assert response.message.content == "Okay, é"


def test_error_event_after_deltas_fails_with_its_status() -> None:
    start, _ = STREAM.split(b"event: content_block_stop", 1)
    broken = start + sse(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    recorder = Recorder(streamed(broken))
    with pytest.raises(ModelHTTPError) as caught:
        call(recorder, ask(on_delta=lambda delta: None))
    assert caught.value.status_code == 529
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, content=b"<html>gateway</html>"),
        httpx.Response(200, json={"type": "message", "content": [{"type": "text"}]}),
        httpx.Response(200, json={"type": "message"}),
        httpx.Response(200, json={"type": "error", "error": {"message": "nope"}}),
        streamed(sse({"type": "message_stop"})),
        streamed(
            sse(
                {
                    "type": "content_block_delta",
                    "index": 3,
                    "delta": {"type": "input_json_delta", "partial_json": "{"},
                }
            )
        ),
    ],
    ids=["html", "text-without-text", "no-content", "error-object", "no-start", "unknown-block"],
)
def test_replies_that_cannot_be_understood(response: httpx.Response) -> None:
    recorder = Recorder(response)
    with pytest.raises(UnexpectedModelResponse):
        call(recorder, ask(on_delta=lambda delta: None))
    assert len(recorder.requests) == 1


def test_authentication_error_is_typed_and_not_retried() -> None:
    body = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    recorder = Recorder(httpx.Response(401, json=body))
    with pytest.raises(ModelAuthenticationError, match="invalid x-api-key"):
        call(recorder, ask())
    assert len(recorder.requests) == 1


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    recorder = Recorder()
    with pytest.raises(ModelAuthenticationError, match="ANTHROPIC_API_KEY"):
        call(recorder, ask(), api_key=None)
    assert recorder.requests == []


def test_base_url_and_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example/anthropic/")
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(), api_key=None)
    assert recorder.requests[0].url == "https://proxy.example/anthropic/v1/messages"
    assert recorder.requests[0].headers["x-api-key"] == "sk-ant-env"
