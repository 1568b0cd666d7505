"""OpenAIChatModel's wire mapping, checked with httpx.MockTransport.

Fixture shapes follow the OpenAI API reference for Chat Completions (POST /chat/completions):
"The chat completion object" for whole replies and "The chat completion chunk object" for
streams (``data: [DONE]`` at the end; with ``stream_options.include_usage`` a last chunk has
empty ``choices`` and the ``usage``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
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
from actors.models import INVALID_ARGUMENTS_KEY, OpenAIChatModel, RetryPolicy
from actors.models._model import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamDelta,
    ToolDefinition,
)

FAST = RetryPolicy(max_attempts=3, initial=0.001, max_delay=0.002, jitter=0)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather of a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
TIME = ToolDefinition(name="get_time", description="Time now.", parameters={"type": "object"})

# The chat completion object (OpenAI API reference), with two parallel tool calls.
TOOL_REPLY = {
    "id": "chatcmpl-123",
    "object": "chat.completion",
    "created": 1677652288,
    "model": "gpt-4o-mini-2024-07-18",
    "system_fingerprint": "fp_44709d6fcb",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": ""},
                    },
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 82,
        "completion_tokens": 17,
        "total_tokens": 99,
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}


def text_reply(text: str = "Hello!") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
    }


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    # The chat completion chunk object (OpenAI API reference).
    return {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(*items: dict[str, Any] | str) -> bytes:
    return "".join(
        f"data: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}\n\n"
        for item in items
    ).encode()


STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "check\u2028 é."}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Paris"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 1,
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ]
        }
    ),
    chunk({}, finish="tool_calls"),
    {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [],
        "usage": {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38},
    },
    "[DONE]",
)

Handler = Callable[[httpx.Request], httpx.Response]


def call(
    handler: Handler,
    request: ModelRequest,
    **options: Any,
) -> ModelResponse:
    async def main() -> ModelResponse:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(transport=transport) as client:
            options.setdefault("api_key", "sk-test")
            model = OpenAIChatModel("gpt-4o-mini", http_client=client, retry=FAST, **options)
            return await model.request(request)

    return asyncio.run(main())


class Recorder:
    """A MockTransport handler that answers from a list and keeps the requests."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    @property
    def body(self) -> Any:
        return json.loads(self.requests[-1].content)


def ask(*messages: Any, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=list(messages) or [UserMessage(content="hi")], **fields)


def test_request_maps_every_message_kind_tools_and_settings() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    transcript = [
        SystemMessage(content="Be brief."),
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(
            content="",
            tool_calls=(ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),),
        ),
        ToolResultMessage(tool_call_id="call_a", tool_name="get_weather", content="Sunny"),
    ]
    settings: ModelSettings = {
        "tool_choice": "get_weather",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["END"],
        "extra_body": {"user": "u-1"},
    }
    call(recorder, ask(*transcript, tools=[WEATHER], settings=settings))

    sent = recorder.requests[0]
    assert sent.method == "POST"
    assert sent.url == "https://api.openai.com/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert recorder.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "Sunny"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather of a city.",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "max_completion_tokens": 50,
        "seed": 7,
        "stop": ["END"],
        "user": "u-1",
    }


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_tool_choice_keywords_pass_through(choice: str) -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(tools=[WEATHER], settings={"tool_choice": choice}))
    assert recorder.body["tool_choice"] == choice


def test_tool_choice_naming_no_tool_is_a_caller_mistake() -> None:
    recorder = Recorder()
    with pytest.raises(UserError, match="get_time"):
        call(recorder, ask(tools=[WEATHER], settings={"tool_choice": "get_time"}))
    assert recorder.requests == []


def test_tool_fields_are_left_out_without_tools() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(settings={"tool_choice": "auto", "parallel_tool_calls": True}))
    assert "tools" not in recorder.body
    assert "tool_choice" not in recorder.body
    assert "parallel_tool_calls" not in recorder.body


def test_other_servers_get_max_tokens() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(settings={"max_tokens": 9}), base_url="http://vllm.internal:8000/v1")
    assert recorder.requests[0].url == "http://vllm.internal:8000/v1/chat/completions"
    assert recorder.body["max_tokens"] == 9
    assert "max_completion_tokens" not in recorder.body


def test_request_settings_override_model_defaults() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(
        recorder,
        ask(settings={"temperature": 0.9}),
        settings={"temperature": 0.1, "top_p": 0.5},
    )
    assert recorder.body["temperature"] == 0.9
    assert recorder.body["top_p"] == 0.5


def test_reply_with_parallel_tool_calls_and_usage() -> None:
    response = call(Recorder(httpx.Response(200, json=TOOL_REPLY)), ask(tools=[WEATHER, TIME]))
    assert response.message == AssistantMessage(
        content="",
        tool_calls=(
            ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="call_b", name="get_time", arguments={}),
        ),
    )
    assert response.usage == Usage(requests=1, input_tokens=82, output_tokens=17)
    assert response.finish_reason == "tool_calls"
    assert response.model_name == "gpt-4o-mini-2024-07-18"


def test_text_reply() -> None:
    response = call(Recorder(httpx.Response(200, json=text_reply("Bonjour"))), ask())
    assert response.message == AssistantMessage(content="Bonjour")
    assert response.finish_reason == "stop"


def test_arguments_that_are_not_a_json_object_are_kept_for_the_loop_to_report() -> None:
    reply = json.loads(json.dumps(TOOL_REPLY))
    calls = reply["choices"][0]["message"]["tool_calls"]
    calls[0]["function"]["arguments"] = '{"city": "Par'
    calls[1]["function"]["arguments"] = "[1, 2]"
    response = call(Recorder(httpx.Response(200, json=reply)), ask())
    first, second = response.message.tool_calls
    assert first.arguments == {INVALID_ARGUMENTS_KEY: '{"city": "Par'}
    assert second.arguments == {INVALID_ARGUMENTS_KEY: "[1, 2]"}

    # Sent back in the transcript, the model sees exactly the text it wrote.
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(UserMessage(content="hi"), response.message))
    sent = recorder.body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"city": "Par'


def byte_pieces(data: bytes, size: int) -> AsyncIterator[bytes]:
    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(data), size):
            yield data[start : start + size]

    return pieces()


@pytest.mark.parametrize("piece", [1, 7, 10_000])
def test_stream_assembles_text_and_tool_calls_and_reports_deltas(piece: int) -> None:
    recorder = Recorder(
        httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=byte_pieces(STREAM, piece),
        )
    )
    deltas: list[StreamDelta] = []
    response = call(recorder, ask(tools=[WEATHER, TIME], on_delta=deltas.append))

    assert recorder.body["stream"] is True
    assert recorder.body["stream_options"] == {"include_usage": True}
    assert recorder.requests[0].headers["accept"] == "text/event-stream"
    assert deltas == [
        StreamDelta(kind="text", text="Let me "),
        StreamDelta(kind="text", text="check\u2028 é."),
        StreamDelta(
            kind="tool_call", text="", index=0, tool_call_id="call_a", tool_name="get_weather"
        ),
        StreamDelta(kind="tool_call", text='{"ci', index=0),
        StreamDelta(kind="tool_call", text='ty": "Paris"}', index=0),
        StreamDelta(
            kind="tool_call", text="{}", index=1, tool_call_id="call_b", tool_name="get_time"
        ),
    ]
    assert response.message == AssistantMessage(
        content="Let me check\u2028 é.",
        tool_calls=(
            ToolCall(id="call_a", name="get_weather", arguments={"city": "Paris"}),
            ToolCall(id="call_b", name="get_time", arguments={}),
        ),
    )
    assert response.usage == Usage(requests=1, input_tokens=30, output_tokens=8)
    assert response.finish_reason == "tool_calls"
    assert response.model_name == "gpt-4o-mini-2024-07-18"


def test_streaming_follows_the_setting_over_the_listener() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    deltas: list[StreamDelta] = []
    call(recorder, ask(on_delta=deltas.append, settings={"stream": False}))
    assert "stream" not in recorder.body
    assert deltas == []

    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM)
    )
    response = call(recorder, ask(settings={"stream": True}))
    assert recorder.body["stream"] is True
    assert response.message.content == "Let me check\u2028 é."


def test_a_server_that_ignores_stream_true_still_works() -> None:
    recorder = Recorder(httpx.Response(200, json=text_reply("whole")))
    response = call(recorder, ask(on_delta=lambda delta: None))
    assert recorder.body["stream"] is True
    assert response.message.content == "whole"


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, content=b"{not json"),
        httpx.Response(200, json={"id": "x", "object": "chat.completion"}),
        httpx.Response(200, json={"choices": []}),
        httpx.Response(200, json={"choices": [{"message": {"tool_calls": [{"id": "c"}]}}]}),
        httpx.Response(200, json=["a list"]),
        httpx.Response(200, json={"error": {"message": "model overloaded"}}),
        httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: {oops\n\n"
        ),
        httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=sse(chunk({"tool_calls": [{"index": "x"}]})),
        ),
    ],
    ids=[
        "bad-json",
        "no-choices",
        "empty-choices",
        "bad-tool-call",
        "list",
        "error-object",
        "bad-chunk",
        "bad-index",
    ],
)
def test_replies_that_cannot_be_understood(response: httpx.Response) -> None:
    recorder = Recorder(response)
    with pytest.raises(UnexpectedModelResponse):
        call(recorder, ask(on_delta=lambda delta: None))
    assert len(recorder.requests) == 1, "a reply that arrived is never retried"


def test_error_status_keeps_status_and_body_excerpt() -> None:
    body = {"error": {"message": "Invalid 'messages': empty.", "type": "invalid_request_error"}}
    recorder = Recorder(httpx.Response(400, json=body))
    with pytest.raises(ModelHTTPError) as caught:
        call(recorder, ask())
    assert caught.value.status_code == 400
    assert "Invalid 'messages': empty." in caught.value.body
    assert "400" in str(caught.value)
    assert len(recorder.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_not_retried(status: int) -> None:
    recorder = Recorder(httpx.Response(status, json={"error": {"message": "bad key"}}))
    with pytest.raises(ModelAuthenticationError) as caught:
        call(recorder, ask())
    assert caught.value.status_code == status
    assert len(recorder.requests) == 1


def test_rate_limit_is_retried_then_succeeds() -> None:
    recorder = Recorder(
        httpx.Response(
            429, json={"error": {"message": "slow down"}}, headers={"retry-after-ms": "1"}
        ),
        httpx.Response(503, text="unavailable"),
        httpx.Response(200, json=text_reply("finally")),
    )
    response = call(recorder, ask())
    assert response.message.content == "finally"
    assert len(recorder.requests) == 3


def test_error_inside_a_stream_before_any_delta_is_retried() -> None:
    failing = sse({"error": {"message": "The server had an error", "type": "server_error"}})
    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=failing),
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM),
    )
    deltas: list[StreamDelta] = []
    response = call(recorder, ask(on_delta=deltas.append))
    assert len(recorder.requests) == 2
    assert response.message.content == "Let me check\u2028 é."
    assert deltas[0] == StreamDelta(kind="text", text="Let me ")


def test_error_inside_a_stream_after_deltas_fails_without_retry() -> None:
    failing = sse(
        chunk({"content": "Hel"}),
        {"error": {"message": "The server had an error", "type": "server_error"}},
    )
    recorder = Recorder(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=failing),
    )
    deltas: list[StreamDelta] = []
    with pytest.raises(ModelHTTPError, match="server had an error"):
        call(recorder, ask(on_delta=deltas.append))
    assert deltas == [StreamDelta(kind="text", text="Hel")]
    assert len(recorder.requests) == 1


def test_missing_key_is_reported_at_request_time_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    recorder = Recorder()
    model = OpenAIChatModel("gpt-4o-mini")  # building it without a key is fine
    assert model.base_url == "https://api.openai.com/v1"
    with pytest.raises(ModelAuthenticationError, match="OPENAI_API_KEY"):
        call(recorder, ask(), api_key=None)
    assert recorder.requests == []


def test_key_comes_from_the_environment_when_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(), api_key=None)
    assert recorder.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_key_function_is_called_per_request() -> None:
    keys = iter(["sk-one", "sk-two"])
    recorder = Recorder(
        httpx.Response(200, json=text_reply()), httpx.Response(200, json=text_reply())
    )

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recorder)) as client:
            model = OpenAIChatModel("m", api_key=lambda: next(keys), http_client=client)
            await model.request(ask())
            await model.request(ask())

    asyncio.run(main())
    assert [r.headers["authorization"] for r in recorder.requests] == [
        "Bearer sk-one",
        "Bearer sk-two",
    ]


def test_environment_key_never_goes_to_a_server_named_in_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    recorder = Recorder(httpx.Response(200, json=text_reply()))
    call(recorder, ask(), api_key=None, base_url="http://127.0.0.1:9/v1")
    assert "authorization" not in recorder.requests[0].headers


def test_a_body_that_cannot_be_json_is_a_caller_mistake() -> None:
    recorder = Recorder()
    with pytest.raises(UserError, match="JSON"):
        call(recorder, ask(settings={"temperature": float("nan")}))
    with pytest.raises(UserError, match="JSON"):
        call(recorder, ask(settings={"extra_body": {"user": object()}}))
    assert recorder.requests == []


def test_content_given_as_a_list_of_text_parts() -> None:
    reply = text_reply()
    reply["choices"][0]["message"]["content"] = [
        {"type": "text", "text": "Hello, "},
        {"type": "text", "text": "world."},
    ]
    response = call(Recorder(httpx.Response(200, json=reply)), ask())
    assert response.message.content == "Hello, world."


def test_a_refusal_is_the_reply_text() -> None:
    reply = text_reply()
    reply["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "No."}
    response = call(Recorder(httpx.Response(200, json=reply)), ask())
    assert response.message.content == "No."
