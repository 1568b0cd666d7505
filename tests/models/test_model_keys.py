"""API keys never show up in logs, output, errors, tracebacks, reprs or pickles.

The loopback server plays a hostile provider: it echoes the key it received in error bodies,
in malformed replies and inside a stream's error event, the way real providers sometimes
quote a rejected key back.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
import traceback
from typing import Any

import httpx
import pytest
import structlog

from actors.context._messages import UserMessage
from actors.exceptions import ModelError
from actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy
from actors.models._model import ModelRequest

KEY = "sk-leak-CANARY-7f3a9c2e"
FAST = RetryPolicy(max_attempts=2, initial=0.001, max_delay=0.002, jitter=0)


def echo(status: int, wire: Any, place: str = "body") -> Any:
    """A reply quoting back whatever key the request carried."""

    def reply(handler: Any) -> None:
        received = handler.headers.get("authorization") or handler.headers.get("x-api-key")
        message = f"Incorrect API key provided: {received}"
        if place == "body":
            wire.send_json(handler, status, {"error": {"message": message}})
        elif place == "malformed":
            payload = f'{{"choices": "{message}'.encode()
            handler.send_response(200)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        else:  # an Anthropic error event inside a stream
            event = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message},
            }
            wire.sse([wire.event(event, event="error")])(handler)

    return reply


def library_traceback_with_locals(error: BaseException) -> list[str]:
    """The traceback below the test's own frames, with every local, as rich would print it."""
    tb = error.__traceback__
    while tb is not None and "/actors/" not in tb.tb_frame.f_code.co_filename:
        tb = tb.tb_next
    assert tb is not None, "the error was raised inside the library"
    return list(traceback.TracebackException(type(error), error, tb, capture_locals=True).format())


def test_the_key_never_leaks(
    server: Any,
    wire: Any,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    openai_stream = [
        wire.event(
            {
                "object": "chat.completion.chunk",
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
            }
        ),
        wire.event("[DONE]"),
    ]
    server.script(
        wire.sse(openai_stream),  # a good streamed run
        echo(401, wire),  # refused, key quoted back
        echo(500, wire),  # failing twice, key quoted back
        echo(500, wire),
        echo(200, wire, "malformed"),  # a broken reply quoting the key
        wire.stalled(),  # a timeout, twice
        wire.stalled(),
        echo(403, wire),  # Anthropic refuses
        echo(200, wire, "stream-error"),  # Anthropic fails inside a stream
    )
    errors: list[BaseException] = []
    deltas: list[Any] = []

    async def main() -> list[Any]:
        openai = OpenAIChatModel(
            "m", base_url=server.url + "/v1", api_key=KEY, retry=FAST, timeout=0.3
        )
        anthropic = AnthropicModel("c", base_url=server.url, api_key=KEY, retry=FAST)
        request = ModelRequest(messages=[UserMessage(content="hi")], on_delta=deltas.append)
        results: list[Any] = []
        async with openai, anthropic:
            for model in (openai, openai, openai, openai, openai, anthropic, anthropic):
                try:
                    results.append(await model.request(request))
                except ModelError as error:
                    errors.append(error)
        return [*results, openai, anthropic]

    with structlog.testing.capture_logs() as logs:
        results = asyncio.run(main())

    # The run exercised every path, and the key really went over the wire.
    assert [type(e).__name__ for e in errors] == [
        "ModelAuthenticationError",
        "ModelHTTPError",
        "UnexpectedModelResponse",
        "ModelTimeoutError",
        "ModelAuthenticationError",
        "ModelHTTPError",
    ]
    assert server.received[0].headers["authorization"] == f"Bearer {KEY}"
    assert server.received[-1].headers["x-api-key"] == KEY

    out, err = capfd.readouterr()
    seen = [out, err, caplog.text, repr(logs), repr(results), repr(deltas)]
    for error in errors:
        seen += [str(error), repr(error), repr(vars(error))]
        seen += traceback.format_exception(error)
        seen += library_traceback_with_locals(error)
    models = results[-2:]
    seen += [repr(model) for model in models] + [repr(vars(model)) for model in models]
    blobs = [pickle.dumps(model) for model in models]

    for text in seen:
        assert KEY not in text
    for blob in blobs:
        assert KEY.encode() not in blob
    assert any("***" in str(error) for error in errors), "the quoted key was masked"


def test_auth_objects_do_not_show_the_key() -> None:
    from actors.models._auth import ApiKey, HeaderAuth

    key = ApiKey(KEY)
    auth = HeaderAuth("x-api-key", key)
    assert KEY not in repr(key) + str(key) + repr(auth)
    with pytest.raises(TypeError):
        pickle.dumps(key)
    request = httpx.Request("POST", "http://example.invalid")
    flow = auth.auth_flow(request)
    assert next(flow).headers["x-api-key"] == KEY
