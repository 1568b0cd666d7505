from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from actors import AgentContext, Answer, CancellationToken, RunContext, ToolCall, Usage
from actors.exceptions import Cancelled, UserError


@dataclasses.dataclass(frozen=True)
class Deps:
    db_url: str


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True)
    region: str


def test_defaults() -> None:
    run: RunContext[Mapping[str, Any]] = RunContext()
    assert run.tool_context == {}
    assert run.metadata == {}
    assert (run.agent_id, run.parent_id, run.run_id) == ("", None, "")
    assert (run.tool_call_id, run.tool_name, run.retry, run.timeout) == ("", "", 0, None)
    assert run.usage == Usage()
    assert run.answer is None
    assert not run.cancelled


def test_generic_over_the_tool_context_type() -> None:
    # Subscripted and called, as users write it to get a typed ctx.tool_context.
    run = RunContext[Deps](tool_context=Deps("sqlite://"))
    assert run.tool_context.db_url == "sqlite://"
    settings = RunContext[Settings](tool_context=Settings(region="eu"))
    assert settings.tool_context.region == "eu"


def test_run_context_is_frozen() -> None:
    run = RunContext[Deps](tool_context=Deps("x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.retry = 3  # type: ignore[misc]
    assert dataclasses.replace(run, retry=3).retry == 3


def test_cancellation_token() -> None:
    token = CancellationToken()
    run = RunContext[Deps](tool_context=Deps("x"), cancellation=token)
    run.raise_if_cancelled()
    token.cancel("user pressed stop")
    assert run.cancelled
    with pytest.raises(Cancelled, match="user pressed stop") as info:
        run.raise_if_cancelled()
    assert info.value.reason == "user pressed stop"


def test_each_run_context_gets_its_own_token() -> None:
    first, second = RunContext[Deps](tool_context=Deps("x")), RunContext[Deps](Deps("x"))
    first.cancellation.cancel()
    assert first.cancelled
    assert not second.cancelled


def test_answer_is_set_only_when_resuming() -> None:
    ctx = AgentContext()
    call = ToolCall(id="c1", name="ask")
    assert ctx.run_context(call).answer is None
    answer = Answer(data="Paris")
    assert ctx.run_context(call, answer=answer).answer is answer


def test_the_cancellation_token_is_passed_through() -> None:
    token = CancellationToken()
    run = AgentContext().run_context(ToolCall(id="c1", name="t"), cancellation=token)
    assert run.cancellation is token


def test_delegate_needs_a_runtime() -> None:
    with pytest.raises(UserError, match="delegate\\(\\) needs a running agent"):
        RunContext().delegate(object(), "task")


def test_delegate_goes_through_the_runtime_plug() -> None:
    calls: list[tuple[Any, str, dict[str, Any]]] = []

    def delegator(agent: Any, task: str, /, **kwargs: Any) -> concurrent.futures.Future[Any]:
        calls.append((agent, task, kwargs))
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result("child said hi")
        return future

    run = AgentContext().run_context(ToolCall(id="c1", name="t"), delegator=delegator)
    assert run.delegate("helper", "say hi", timeout=3) == "child said hi"
    assert asyncio.run(run.adelegate("helper", "again", timeout=4)) == "child said hi"
    assert calls == [("helper", "say hi", {"timeout": 3}), ("helper", "again", {"timeout": 4})]
    assert "delegator" not in repr(run)
