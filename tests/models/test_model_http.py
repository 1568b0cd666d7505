"""Both providers against a real HTTP server on loopback (see conftest.py).

Reply shapes follow the OpenAI Chat Completions API reference (chat completion object and
chunk objects) and Anthropic's Messages API reference and streaming guide, as in
test_openai_model.py and test_anthropic_model.py.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import httpx
import pytest
import structlog

from actors.context._cancel import CancellationToken
from actors.context._messages import AssistantMessage, ToolCall, UserMessage
from actors.context._usage import Usage
from actors.exceptions import (
    Cancelled,
    ModelAuthenticationError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelResponse,
)
from actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy, infer_model
from actors.models._model import ModelRequest, ModelResponse, StreamDelta, ToolDefinition

FAST = RetryPolicy(max_attempts=3, initial=0.001, max_delay=0.005, jitter=0)
WEATHER = ToolDefinition("get_weather", "Weather of a city.", {"type": "object"})


def openai_text(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "local-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "local-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_stream(wire: Any) -> list[str]:
    return [
        wire.event(openai_chunk({"role": "assistant", "content": ""})),
        wire.event(openai_chunk({"content": "Sunny "})),
        wire.event(openai_chunk({"content": "soon."})),
        wire.event(
            openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city":'},
                        }
                    ]
                }
            )
        ),
        wire.event(
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]})
        ),
        wire.event(openai_chunk({}, finish="tool_calls")),
        wire.event(
            {
                "id": "chatcmpl-2",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "local-model",
                "choices": [],
                "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15},
            }
        ),
        wire.event("[DONE]"),
    ]


def anthropic_stream(wire: Any) -> list[str]:
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
                "usage": {"input_tokens": 20, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "On it."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {},
            },
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]
    return [wire.event(event, event=event["type"]) for event in events]


def ask(**fields: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content="Weather in Oslo?")], **fields)


def openai(server: Any, **options: Any) -> OpenAIChatModel:
    options.setdefault("retry", FAST)
    return OpenAIChatModel("local-model", base_url=server.url + "/v1", **options)


def run(model: Any, request: ModelRequest) -> ModelResponse:
    async def main() -> ModelResponse:
        async with model:
            result: ModelResponse = await model.request(request)
            return result

    return asyncio.run(main())


def test_openai_streaming_over_http(server: Any, wire: Any) -> None:
    server.script(wire.sse(openai_stream(wire)))
    deltas: list[StreamDelta] = []
    response = run(openai(server), ask(tools=[WEATHER], on_delta=deltas.append))

    assert server.received[0].path == "/v1/chat/completions"
    assert server.received[0].body["stream"] is True
    assert [d.text for d in deltas if d.kind == "text"] == ["Sunny ", "soon."]
    assert "".join(d.text for d in deltas if d.kind == "tool_call") == '{"city":"Oslo"}'
    assert response.message == AssistantMessage(
        content="Sunny soon.",
        tool_calls=(ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"}),),
    )
    assert response.usage == Usage(requests=1, input_tokens=11, output_tokens=4)


def test_openai_whole_reply_over_http(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("Hi there")))
    response = run(openai(server), ask())
    assert response.message.content == "Hi there"
    assert "stream" not in server.received[0].body


def test_anthropic_streaming_over_http(server: Any, wire: Any) -> None:
    server.script(wire.sse(anthropic_stream(wire)))
    deltas: list[StreamDelta] = []
    model = AnthropicModel("claude-test", base_url=server.url, api_key="sk-ant-x", retry=FAST)
    response = run(model, ask(tools=[WEATHER], on_delta=deltas.append))

    assert server.received[0].path == "/v1/messages"
    assert server.received[0].headers["x-api-key"] == "sk-ant-x"
    assert deltas[0] == StreamDelta(kind="text", text="On it.")
    assert response.message == AssistantMessage(
        content="On it.",
        tool_calls=(ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Oslo"}),),
    )
    assert response.usage == Usage(requests=1, input_tokens=20, output_tokens=30)
    assert response.finish_reason == "tool_calls"


def test_infer_model_spec_reaches_the_server(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("compatible")))
    model = infer_model(f"openai-compatible:local-model@{server.url}/v1")
    response = run(model, ask())
    assert response.message.content == "compatible"
    assert "authorization" not in server.received[0].headers


def test_429_with_retry_after_is_honoured(server: Any, wire: Any) -> None:
    # Backoff alone would wait 30 s; the server's Retry-After: 0 makes the retry immediate.
    slow_backoff = RetryPolicy(max_attempts=2, initial=30, max_delay=30, total=60, jitter=0)
    server.script(
        wire.json(429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "0"}),
        wire.json(200, openai_text("after the limit")),
    )
    started = time.monotonic()
    response = run(openai(server, retry=slow_backoff), ask())
    assert time.monotonic() - started < 10
    assert response.message.content == "after the limit"
    assert len(server.received) == 2


def test_429_asking_for_longer_than_the_budget_fails_at_once(server: Any, wire: Any) -> None:
    server.script(wire.json(429, {"error": {"message": "Rate limit"}}, {"retry-after": "3600"}))
    with pytest.raises(ModelHTTPError) as caught:
        run(openai(server), ask())
    assert caught.value.status_code == 429
    assert "Rate limit" in caught.value.body
    assert len(server.received) == 1


def test_500_then_success(server: Any, wire: Any) -> None:
    server.script(
        wire.raw(500, b"Internal Server Error", "text/plain"),
        wire.json(200, openai_text("recovered")),
    )
    response = run(openai(server), ask())
    assert response.message.content == "recovered"
    assert len(server.received) == 2


def test_retries_are_logged_with_the_model_and_agent(server: Any, wire: Any) -> None:
    server.script(wire.json(503, {"error": "busy"}), wire.json(200, openai_text("ok")))
    with structlog.testing.capture_logs() as logs:
        run(openai(server), ask(agent_id="root-1"))
    (retry,) = [log for log in logs if log["event"] == "model.retry"]
    assert retry["model"] == "openai:local-model"
    assert retry["agent_id"] == "root-1"
    assert retry["attempt"] == 1
    assert "503" in retry["reason"]


def test_500_every_time_ends_in_a_typed_error(server: Any, wire: Any) -> None:
    server.script(*[wire.json(502, {"error": "bad gateway"}) for _ in range(3)])
    with pytest.raises(ModelHTTPError) as caught:
        run(openai(server), ask())
    assert caught.value.status_code == 502
    assert "bad gateway" in caught.value.body
    assert len(server.received) == FAST.max_attempts


def test_malformed_json_is_not_retried(server: Any, wire: Any) -> None:
    server.script(wire.raw(200, b'{"choices": [ {"message": '))
    with pytest.raises(UnexpectedModelResponse, match="malformed JSON"):
        run(openai(server), ask())
    assert len(server.received) == 1


def test_401_is_an_authentication_error(server: Any, wire: Any) -> None:
    server.script(wire.json(401, {"error": {"message": "Incorrect API key provided"}}))
    with pytest.raises(ModelAuthenticationError) as caught:
        run(openai(server, api_key="sk-wrong"), ask())
    assert caught.value.status_code == 401
    assert len(server.received) == 1


def test_connection_dropped_mid_stream_after_deltas_fails(server: Any, wire: Any) -> None:
    server.script(wire.sse(openai_stream(wire), drop_after=3))
    deltas: list[StreamDelta] = []
    with pytest.raises(ModelError, match="connection") as caught:
        run(openai(server), ask(on_delta=deltas.append))
    assert type(caught.value) is ModelError
    # Listeners saw the start of the reply; a retry would have shown it to them twice.
    assert [d.text for d in deltas] == ["Sunny ", "soon."]
    assert len(server.received) == 1


def test_connection_dropped_mid_stream_without_listeners_is_retried(server: Any, wire: Any) -> None:
    server.script(
        wire.sse(openai_stream(wire), drop_after=3),
        wire.sse(openai_stream(wire)),
    )
    response = run(openai(server), ask(settings={"stream": True}))
    assert response.message.content == "Sunny soon."
    assert len(server.received) == 2


def test_stream_cut_before_it_began_is_retried_even_with_listeners(server: Any, wire: Any) -> None:
    server.script(
        wire.sse(anthropic_stream(wire), drop_after=1),  # message_start only: no delta yet
        wire.sse(anthropic_stream(wire)),
    )
    deltas: list[StreamDelta] = []
    model = AnthropicModel("claude-test", base_url=server.url, retry=FAST)
    response = run(model, ask(on_delta=deltas.append))
    assert response.message.content == "On it."
    assert [d.text for d in deltas if d.kind == "text"] == ["On it."]
    assert len(server.received) == 2


def test_slow_response_past_the_timeout(server: Any, wire: Any) -> None:
    server.script(wire.stalled(), wire.stalled())
    model = openai(
        server,
        timeout=httpx.Timeout(0.2),
        retry=RetryPolicy(max_attempts=2, initial=0.001, jitter=0),
    )
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError, match="did not answer in time"):
        run(model, ask())
    assert time.monotonic() - started < 5
    assert len(server.received) == 2
    assert server.disconnected.wait(5), "the timed-out request's connection was closed"


def test_timeout_setting_applies_to_one_request(server: Any, wire: Any) -> None:
    server.script(wire.stalled())
    model = openai(server, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelTimeoutError):
        run(model, ask(settings={"timeout": 0.2}))


def test_connection_refused_is_retried_then_typed() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", retry=FAST)
    with pytest.raises(ModelError, match="connection"):
        run(model, ask())


def cancel_when(signal: threading.Event, token: CancellationToken) -> threading.Thread:
    """Cancel ``token`` from another thread once ``signal`` is set, like a host would."""

    def cancel() -> None:
        if signal.wait(5):
            token.cancel("user pressed stop")

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_cancel_mid_stream_closes_the_request(server: Any, wire: Any) -> None:
    server.script(wire.stalled_stream(openai_stream(wire)[:2]))
    token = CancellationToken()
    first_delta = threading.Event()
    canceller = cancel_when(first_delta, token)
    started = time.monotonic()
    with pytest.raises(Cancelled, match="user pressed stop"):
        run(openai(server), ask(cancellation=token, on_delta=lambda delta: first_delta.set()))
    canceller.join()
    assert time.monotonic() - started < 5
    assert server.disconnected.wait(5), "the server saw the connection close"


def test_cancel_while_waiting_for_the_reply(server: Any, wire: Any) -> None:
    server.script(wire.stalled())
    token = CancellationToken()
    canceller = cancel_when(server.request_received, token)
    with pytest.raises(Cancelled):
        run(openai(server), ask(cancellation=token))
    canceller.join()
    assert server.disconnected.wait(5)


def test_cancelled_before_sending_sends_nothing(server: Any) -> None:
    token = CancellationToken()
    token.cancel("too late")
    with pytest.raises(Cancelled, match="too late"):
        run(openai(server), ask(cancellation=token))
    assert server.received == []


def test_cancel_after_the_reply_is_harmless(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("done")))
    token = CancellationToken()

    async def main() -> str:
        async with openai(server) as model:
            response = await model.request(ask(cancellation=token))
            token.cancel("afterwards")
            await asyncio.sleep(0)  # give a stray cancel a chance to land (none must)
            return response.message.content

    assert asyncio.run(main()) == "done"


def test_a_caller_timeout_is_not_mistaken_for_a_run_cancel(server: Any, wire: Any) -> None:
    server.script(wire.stalled())

    async def main() -> None:
        async with openai(server) as model:
            await asyncio.wait_for(model.request(ask()), timeout=0.2)

    with pytest.raises(TimeoutError):
        asyncio.run(main())


def test_one_client_is_reused_across_requests(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("one")), wire.json(200, openai_text("two")))

    async def main() -> None:
        async with openai(server) as model:
            await model.request(ask())
            client = model._lease.held
            await model.request(ask())
            assert model._lease.held == client

    asyncio.run(main())
    first, second = server.received
    assert first.client_port == second.client_port, "the second request reused the connection"


def test_many_concurrent_requests_on_one_model(server: Any, wire: Any) -> None:
    server.script(*[wire.json(200, openai_text(f"r{n}")) for n in range(20)])

    async def main() -> list[str]:
        async with openai(server) as model:
            replies = await asyncio.gather(*[model.request(ask()) for _ in range(20)])
            return sorted(reply.message.content for reply in replies)

    assert asyncio.run(main()) == sorted(f"r{n}" for n in range(20))


def test_a_user_client_is_used_and_left_open(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("via proxy")))
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        seen.append(str(request.url))

    async def main() -> bool:
        async with httpx.AsyncClient(
            headers={"x-gateway-tenant": "team-a"}, event_hooks={"request": [record]}
        ) as client:
            model = openai(server, http_client=client)
            await model.request(ask())
            await model.aclose()
            return client.is_closed

    assert asyncio.run(main()) is False
    assert seen == [server.url + "/v1/chat/completions"]
    assert server.received[0].headers["x-gateway-tenant"] == "team-a"


def test_aclose_then_reuse_opens_a_new_client(server: Any, wire: Any) -> None:
    server.script(wire.json(200, openai_text("a")), wire.json(200, openai_text("b")))

    async def main() -> list[str]:
        model = openai(server)
        first = await model.request(ask())
        await model.aclose()
        second = await model.request(ask())
        await model.aclose()
        return [first.message.content, second.message.content]

    assert asyncio.run(main()) == ["a", "b"]
