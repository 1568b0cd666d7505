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
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

import actors
from actors.context._messages import UserMessage
from actors.exceptions import ModelError
from actors.models import AnthropicModel, OpenAIChatModel, RetryPolicy
from actors.models._model import ModelRequest

KEY = "sk-leak-CANARY-7f3a9c2e"
# The library's own directory: a frame is the library's by where its file is, not by a folder
# name (a clone may itself sit in a folder called "actors").
LIBRARY = Path(actors.__file__).resolve().parent
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


def _in_library(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(LIBRARY)


def library_traceback_with_locals(error: BaseException) -> list[str]:
    """The traceback below the test's own frames, with every local, as rich would print it."""
    tb = error.__traceback__
    while tb is not None and not _in_library(tb.tb_frame.f_code.co_filename):
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


CUT_KEY = "sk-9QfZ7xw2LmT4vR8k"


def _leaks(text: str) -> list[str]:
    """The pieces of CUT_KEY (four characters or more) found in ``text``."""
    return [
        CUT_KEY[i:j]
        for i in range(len(CUT_KEY))
        for j in range(i + 4, len(CUT_KEY) + 1)
        if CUT_KEY[i:j] in text
    ]


@pytest.mark.parametrize("inside", [1, 4, 9, len(CUT_KEY) - 1])
def test_a_key_straddling_the_cut_of_an_error_body_never_leaks_even_in_part(
    server: Any, wire: Any, tmp_path: Any, inside: int
) -> None:
    # The body is cut to 500 characters: the key starts ``inside`` characters before the cut.
    from actors import Agent, Runtime
    from actors.exceptions import RunFailedError
    from actors.store import SQLiteStore

    prefix = "x" * (499 - inside)
    body = {"error": {"message": f"{prefix}{CUT_KEY} was refused"}}
    stream_error = wire.event({"error": {"message": f"{prefix[:300]}{CUT_KEY} refused"}})
    server.script(
        wire.json(400, body),  # an error status: the body's excerpt
        wire.raw(200, f"not json {prefix[: 200 - 10 - inside]}{CUT_KEY}".encode()),  # cut at 200
        wire.json(200, body),  # a reply whose error object the parser quotes, cut at 500
        wire.sse([stream_error]),  # an error inside a stream, cut before the key is known
    )
    model = OpenAIChatModel("m", base_url=server.url + "/v1", api_key=CUT_KEY, retry=FAST)
    stream = OpenAIChatModel(
        "m", base_url=server.url + "/v1", api_key=CUT_KEY, retry=FAST, settings={"stream": True}
    )
    seen: list[str] = []
    with SQLiteStore(tmp_path / "s.sqlite") as store, Runtime() as runtime:
        for index, each in enumerate((model, model, model, stream)):
            ref = runtime.spawn(Agent(f"a{index}", model=each), store=store)
            with pytest.raises(RunFailedError) as info:
                ref.run("hi", timeout=10)
            cause = info.value.__cause__
            seen += [str(info.value), repr(info.value), str(cause), repr(vars(cause))]
            seen += [e.model_dump_json() for e in ref.context().events]
    assert "HTTP 400" in seen[0]
    assert any("***" in text for text in seen), "the key was masked"
    for text in seen:
        assert _leaks(text) == [], text
    for path in tmp_path.iterdir():
        assert _leaks(path.read_bytes().decode("utf-8", "replace")) == []
