"""FallbackModel: the next model on a provider failure, recorded in the agent's log.

Scripted models show the rules; the loopback HTTP server shows them over the wire (a 503, a
refused connection), with OpenAI and Anthropic models.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from actors import (
    Agent,
    AgentContext,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RunEnded,
    Runtime,
    StreamDelta,
    TextDelta,
    UserMessage,
)
from actors.exceptions import (
    ModelAuthenticationError,
    ModelError,
    ModelFallbackError,
    ModelHTTPError,
    ModelTimeoutError,
    RunFailedError,
    UnexpectedModelResponse,
    UserError,
)
from actors.models import (
    AnthropicModel,
    FallbackModel,
    OpenAIChatModel,
    RetryPolicy,
    is_provider_failure,
)
from actors.testing import ScriptedModel, SyncDriver

ONCE = RetryPolicy(max_attempts=1)


def unavailable() -> ModelHTTPError:
    return ModelHTTPError("service unavailable", status_code=503, body="busy")


def fallback_events(result_or_error: Any) -> list[dict[str, Any]]:
    return [e.data for e in result_or_error if e.type == "model_fallback"]


def test_a_provider_failure_moves_to_the_next_model_and_is_logged() -> None:
    model = FallbackModel(
        ScriptedModel([unavailable()], name="primary"), ScriptedModel(["hi"], name="backup")
    )
    result = SyncDriver(Agent("a", model=model)).run("hello")
    assert result.output == "hi"
    assert fallback_events(result.events) == [
        {
            "model": "primary",
            "error": "ModelHTTPError",
            "message": "service unavailable",
            "next_model": "backup",
        }
    ]
    header = next(e for e in result.events if e.type == "request_header")
    assert header.data["model"] == "fallback:primary,backup"


@pytest.mark.parametrize(
    "error",
    [
        ModelHTTPError("slow down", status_code=429),
        ModelHTTPError("overloaded", status_code=529),
        ModelHTTPError("bad gateway", status_code=502),
        ModelTimeoutError("no answer"),
        ModelError("the connection failed"),
        UnexpectedModelResponse("garbled"),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(e, "status_code", "")),
)
def test_passing_provider_failures_fall_back(error: Exception) -> None:
    assert is_provider_failure(error)


@pytest.mark.parametrize(
    "error",
    [
        ModelHTTPError("bad request", status_code=400),
        ModelHTTPError("no such model", status_code=404),
        ModelHTTPError("too large", status_code=413),
        ModelAuthenticationError("bad key", status_code=401),
        RuntimeError("a bug"),
        IndexError("a script ran out"),
    ],
    ids=lambda e: type(e).__name__ + str(getattr(e, "status_code", "")),
)
def test_caller_mistakes_and_bugs_do_not_fall_back(error: Exception) -> None:
    assert not is_provider_failure(error)
    backup = ScriptedModel(["never"], name="backup")
    model = FallbackModel(ScriptedModel([error], name="primary"), backup)
    with pytest.raises(RunFailedError) as info:
        SyncDriver(Agent("a", model=model)).run("hello")
    assert info.value.__cause__ is error  # the model's own error, unchanged
    assert backup.requests == []


def test_when_every_model_fails_the_run_fails_with_all_their_errors() -> None:
    first, second = unavailable(), ModelTimeoutError("too slow")
    model = FallbackModel(
        ScriptedModel([first], name="one"),
        ScriptedModel([second], name="two"),
    )
    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=model))
        with pytest.raises(RunFailedError, match="every model failed") as info:
            ref.run("hello", timeout=10)
        events = ref.context().events
    cause = info.value.__cause__
    assert isinstance(cause, ModelFallbackError)
    assert cause.failures == (("one", first), ("two", second))
    assert [(e["model"], e["next_model"]) for e in fallback_events(events)] == [("one", "two")]


def test_fallback_on_decides_which_errors_fall_back() -> None:
    model = FallbackModel(
        ScriptedModel([ModelHTTPError("no such model", status_code=404)], name="new"),
        ScriptedModel(["from the old one"], name="old"),
        fallback_on=lambda error: isinstance(error, ModelHTTPError),
    )
    assert SyncDriver(Agent("a", model=model)).run("hi").output == "from the old one"


class _StreamsThenFails:
    """Streams a piece of its reply, then fails like a dropped connection."""

    name = "flaky"

    async def request(self, request: ModelRequest) -> ModelResponse:
        if request.on_delta is not None:
            request.on_delta(StreamDelta(kind="text", text="Half an ans"))
        raise ModelError("the connection dropped")


def test_a_model_that_failed_mid_stream_is_not_replaced() -> None:
    backup = ScriptedModel(["a whole answer"], name="backup")
    model = FallbackModel(_StreamsThenFails(), backup)
    with Runtime() as runtime:
        events = list(runtime.spawn(Agent("a", model=model)).run_stream("hello"))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Half an ans"]
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert isinstance(ended.error, RunFailedError)
    assert "the connection dropped" in str(ended.error)
    assert backup.requests == []
    # Without a stream nothing was shown, so the next model may answer.
    result = SyncDriver(Agent("a", model=FallbackModel(_StreamsThenFails(), backup))).run("hi")
    assert result.output == "a whole answer"


def test_the_model_fallback_event_survives_a_round_trip_through_serialization() -> None:
    model = FallbackModel(ScriptedModel([unavailable()], name="p"), ScriptedModel(["ok"]))
    driver = SyncDriver(Agent("a", model=model))
    driver.run("hello")
    restored = AgentContext.deserialize(driver.context.serialize())
    assert [e.type for e in restored.events].count("model_fallback") == 1


class _Closable:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(AssistantMessage(content="ok"))

    async def aclose(self) -> None:
        self.closed += 1


def test_aclose_closes_every_inner_model() -> None:
    inner = [_Closable("a"), _Closable("b")]
    model = FallbackModel(*inner, ScriptedModel([]))  # a model with nothing to close is fine

    async def use() -> None:
        async with model:
            await model.request(ModelRequest(messages=[UserMessage(content="hi")]))

    asyncio.run(use())
    assert [m.closed for m in inner] == [1, 1]


def test_a_runtime_closes_the_inner_models_it_used() -> None:
    inner = _Closable("a")
    with Runtime() as runtime:
        runtime.spawn(Agent("a", model=FallbackModel(inner))).run("hi", timeout=10)
    assert inner.closed == 1


def test_bad_models_are_refused() -> None:
    with pytest.raises(UserError, match="takes models"):
        FallbackModel(ScriptedModel([]), 42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="fallback_on"):
        FallbackModel(ScriptedModel([]), fallback_on="always")  # type: ignore[arg-type]


# -- over HTTP ----------------------------------------------------------------------------------


def openai_reply(wire: Any, text: str) -> Any:
    return wire.json(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "backup-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        },
    )


def anthropic_reply(wire: Any, text: str) -> Any:
    return wire.json(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-backup",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2},
        },
    )


def test_a_503_over_http_falls_back_to_another_provider(server: Any, wire: Any) -> None:
    server.script(
        wire.json(503, {"error": {"message": "overloaded"}}), anthropic_reply(wire, "Bonjour")
    )
    primary = OpenAIChatModel("main-model", base_url=server.url + "/v1", retry=ONCE)
    backup = AnthropicModel("claude-backup", base_url=server.url, retry=ONCE)
    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=FallbackModel(primary, backup))).run(
            "Hi", timeout=30
        )
    assert result.output == "Bonjour"
    assert [r.path for r in server.received] == ["/v1/chat/completions", "/v1/messages"]
    (switch,) = fallback_events(result.events)
    assert switch["model"] == "openai:main-model"
    assert switch["error"] == "ModelHTTPError"
    assert switch["next_model"] == "anthropic:claude-backup"
    step_end = [e for e in result.events if e.type == "step_end"][-1]
    assert step_end.data["model"] == "claude-backup"  # the model that answered


def test_a_refused_connection_falls_back(server: Any, wire: Any) -> None:
    with socket.socket() as closed:  # a loopback port with nothing listening on it
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    server.script(openai_reply(wire, "still here"))
    primary = OpenAIChatModel("gone", base_url=f"http://127.0.0.1:{port}/v1", retry=ONCE)
    backup = OpenAIChatModel("backup-model", base_url=server.url + "/v1", retry=ONCE)
    with Runtime() as runtime:  # closes the models' HTTP clients on its way out
        result = runtime.spawn(Agent("a", model=FallbackModel(primary, backup))).run("Hi")
    assert result.output == "still here"
    assert fallback_events(result.events)[0]["error"] == "ModelError"


def test_a_bad_request_over_http_does_not_fall_back(server: Any, wire: Any) -> None:
    server.script(wire.json(400, {"error": {"message": "messages: field required"}}))
    primary = OpenAIChatModel("main-model", base_url=server.url + "/v1", retry=ONCE)
    backup = OpenAIChatModel("backup-model", base_url=server.url + "/v1", retry=ONCE)
    with Runtime() as runtime, pytest.raises(RunFailedError, match="field required") as info:
        runtime.spawn(Agent("a", model=FallbackModel(primary, backup))).run("Hi", timeout=30)
    assert isinstance(info.value.__cause__, ModelHTTPError)
    assert len(server.received) == 1
