"""Token counting: estimates before a request is sent, known windows, calibration, and the
providers' "context too long" errors."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from actors import (
    AssistantMessage,
    ModelRequest,
    ToolCall,
    ToolDefinition,
    UserMessage,
    count_tokens,
)
from actors.exceptions import ContextTooLongError, ModelHTTPError
from actors.models import (
    AnthropicModel,
    OpenAIChatModel,
    TokenCalibration,
    context_window_of,
    estimate_tokens,
)
from actors.models._errors import status_error
from actors.models._tokens import tiktoken_counter


def request_of(*texts: str, tools: tuple[ToolDefinition, ...] = ()) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content=t) for t in texts], tools=tools)


def test_an_estimate_grows_with_the_text_the_calls_and_the_tools() -> None:
    small, large = estimate_tokens(request_of("hi")), estimate_tokens(request_of("hi " * 400))
    assert 0 < small < large
    assert 250 < large < 400  # about four characters a token
    call = AssistantMessage(
        content="", tool_calls=(ToolCall(id="1", name="search", arguments={"q": "x" * 400}),)
    )
    assert estimate_tokens(ModelRequest(messages=[call])) > 100
    tool = ToolDefinition("search", "Search the web. " * 20, {"type": "object"})
    assert estimate_tokens(request_of("hi", tools=(tool,))) > small + 50


def test_every_model_can_count_and_its_own_counter_wins() -> None:
    class Exact:
        name = "exact"

        def count_tokens(self, request: ModelRequest) -> int:
            return 7

    class Plain:
        name = "plain"

    request = request_of("hello there")
    assert count_tokens(Exact(), request) == 7
    assert count_tokens(Plain(), request) == estimate_tokens(request)
    openai = OpenAIChatModel("gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    assert openai.count_tokens(request) > 0  # tiktoken or the estimate, never the network


def test_known_windows_come_from_the_model_or_its_name() -> None:
    openai = OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    claude = AnthropicModel("claude-sonnet-4-5", base_url="http://127.0.0.1:9", api_key="k")
    assert context_window_of(openai) == 128_000
    assert context_window_of(claude) == 200_000

    class Told:
        name = "local"
        context_window = 4_096

    assert context_window_of(Told()) == 4_096
    assert context_window_of(OpenAIChatModel("mystery", base_url="http://127.0.0.1:9/v1")) is None


def test_calibration_follows_what_the_provider_reported_within_bounds() -> None:
    calibration = TokenCalibration()
    assert calibration.apply(100) == 100
    calibration.observe(100, 150)
    assert calibration.apply(100) == 151
    calibration.observe(100, 100_000)  # one odd report cannot make estimates absurd
    assert calibration.ratio == 4.0
    calibration.observe(0, 10)  # nothing to learn from
    assert calibration.ratio == 4.0


def test_tiktoken_is_optional() -> None:
    try:
        import tiktoken  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        assert tiktoken_counter("gpt-4o") is None
    else:  # pragma: no cover - only where it is installed
        counter = tiktoken_counter("gpt-4o")
        assert counter is None or counter("hello world") > 0


@pytest.mark.parametrize(
    "body",
    [
        '{"error": {"message": "This model\'s maximum context length is 8192 tokens", '
        '"type": "invalid_request_error", "code": "context_length_exceeded"}}',
        '{"type": "error", "error": {"type": "invalid_request_error", '
        '"message": "prompt is too long: 210000 tokens > 200000 maximum"}}',
    ],
    ids=["openai", "anthropic"],
)
def test_a_context_too_long_refusal_is_typed(body: str) -> None:
    response = httpx.Response(
        400, content=body.encode(), request=httpx.Request("POST", "http://127.0.0.1/v1")
    )
    error: Any = asyncio.run(status_error(response, None))
    assert isinstance(error, ContextTooLongError)
    assert isinstance(error, ModelHTTPError)
    assert error.status_code == 400


def test_another_bad_request_is_not_too_long() -> None:
    response = httpx.Response(
        400,
        content=b'{"error": {"message": "unknown parameter"}}',
        request=httpx.Request("POST", "http://127.0.0.1/v1"),
    )
    error = asyncio.run(status_error(response, None))
    assert not isinstance(error, ContextTooLongError)
