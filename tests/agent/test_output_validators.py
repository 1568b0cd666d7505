"""Output validators and ModelRetry: the user's last word on an answer, like a tool's retry."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from actors import Agent, RunContext, Runtime, UserMessage, tool
from actors.exceptions import (
    AgentDefinitionError,
    ModelRetry,
    OutputValidationError,
    RunFailedError,
    ToolRetriesExceeded,
)
from actors.loop._output import FINAL_RESULT_TOOL
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import BOUND, tool_results, types


class City(BaseModel):
    name: str
    population: int


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 1000"


def no_shouting(ctx: RunContext, output: str) -> None:
    if output.isupper():
        raise ModelRetry("Do not shout; answer in lower case.")


def test_a_validator_sends_a_text_answer_back_with_its_message() -> None:
    model = ScriptedModel(["HELLO", "hello"])
    agent = Agent("a", model=model, output_validators=[no_shouting])
    result = SyncDriver(agent).run("greet")
    assert result.output == "hello"
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert retry.content == "Do not shout; answer in lower case."
    retried = [e for e in result.events if e.type == "user_message" and e.data.get("source")]
    assert [e.data["source"] for e in retried] == ["output_retry"]


def test_a_validator_sees_the_run_and_how_often_the_answer_was_sent_back() -> None:
    seen: list[tuple[str, int, Any]] = []

    def record(ctx: RunContext, output: int) -> None:
        seen.append((ctx.agent_id, ctx.retry, ctx.tool_context["user"]))
        if output < 0:
            raise ModelRetry("positive, please")

    agent = Agent(
        "a",
        model=ScriptedModel(["-1", "7"]),
        output_type=int,
        output_validators=[record],
    )
    assert SyncDriver(agent, tool_context={"user": "ada"}).run("n?").output == 7
    assert seen == [("a", 0, "ada"), ("a", 1, "ada")]


def test_validators_run_in_order_and_may_replace_the_output() -> None:
    def strip(ctx: RunContext, output: str) -> str:
        return output.strip()

    def keep(ctx: RunContext, output: str) -> None:
        assert output == "hi"  # the previous validator's output

    def shout(ctx: RunContext, output: str) -> str:
        return output.upper()

    agent = Agent("a", model=ScriptedModel(["  hi  "]), output_validators=[strip, keep, shout])
    assert SyncDriver(agent).run("?").output == "HI"


def test_a_validator_refusing_a_final_result_call_answers_that_call() -> None:
    def big(ctx: RunContext, city: City) -> City:
        if city.population < 1000:
            raise ModelRetry("That is a village; name a city.")
        return city

    model = ScriptedModel(
        [
            call(FINAL_RESULT_TOOL, name="Eze", population=200),
            call(FINAL_RESULT_TOOL, name="Lyon", population=500_000),
        ]
    )
    agent = Agent("geo", model=model, tools=[lookup], output_type=City, output_validators=[big])
    result = SyncDriver(agent).run("A city?")
    assert result.output == City(name="Lyon", population=500_000)
    refused, accepted = tool_results(result.messages)
    assert refused.is_error
    assert refused.content == "That is a village; name a city."
    assert accepted.content == "Final result processed."


def test_refusals_count_against_output_retries() -> None:
    def never(ctx: RunContext, output: str) -> None:
        raise ModelRetry("no")

    agent = Agent("a", model=ScriptedModel(["x", "y", "z"]), output_validators=[never])
    with pytest.raises(OutputValidationError, match="no"):
        SyncDriver(agent).run("?")
    tools_agent = Agent(
        "geo",
        model=ScriptedModel([call(FINAL_RESULT_TOOL, name="A", population=n) for n in range(3)]),
        tools=[lookup],
        output_type=City,
        output_validators=[never],
        output_retries=2,
    )
    with pytest.raises(OutputValidationError, match="refused by an output validator") as info:
        SyncDriver(tools_agent).run("?")
    assert len(tool_results(info.value.messages)) == 3


def test_a_validator_that_raises_fails_the_run_with_its_error_as_the_cause() -> None:
    def broken(ctx: RunContext, output: str) -> None:
        raise KeyError("missing")

    agent = Agent("a", model=ScriptedModel(["x"]), output_validators=[broken])
    with pytest.raises(RunFailedError, match="output validator 'broken' failed") as info:
        SyncDriver(agent).run("?")
    assert isinstance(info.value.__cause__, KeyError)


def test_sync_validators_run_on_a_tool_thread_and_async_ones_on_the_event_loop() -> None:
    threads: list[str] = []

    def sync_check(ctx: RunContext, output: str) -> None:
        threads.append(threading.current_thread().name)

    async def async_check(ctx: RunContext, output: str) -> str:
        await asyncio.sleep(0)
        threads.append(threading.current_thread().name)
        return output + "!"

    agent = Agent("a", model=ScriptedModel(["ok"]), output_validators=[sync_check, async_check])
    with Runtime() as runtime:
        assert runtime.spawn(agent).run("?", timeout=BOUND).output == "ok!"
    assert threads[0].startswith("actors-tool")
    assert threads[1] == "actors-effects"


def test_a_validator_past_the_tool_timeout_fails_the_run() -> None:
    release = threading.Event()

    def slow(ctx: RunContext, output: str) -> None:
        release.wait(BOUND)

    agent = Agent("a", model=ScriptedModel(["x"]), output_validators=[slow], tool_timeout=0.1)
    try:
        with Runtime() as runtime, pytest.raises(RunFailedError, match=r"timed out after 0\.1 s"):
            runtime.spawn(agent).run("?", timeout=BOUND)
    finally:
        release.set()


def test_cancelling_while_a_validator_runs_cancels_the_run() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(ctx: RunContext, output: str) -> None:
        entered.set()
        ctx.cancellation.wait(BOUND)
        release.set()

    agent = Agent("a", model=ScriptedModel(["x"]), output_validators=[slow])
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        future = ref.run_async("?")
        assert entered.wait(BOUND)
        assert ref.status == "running"
        ref.cancel("stop")
        assert future.result(BOUND).status == "cancelled"
        assert release.wait(BOUND)  # the validator saw the cancellation


def test_validators_add_no_tool_call_to_the_log_or_the_usage() -> None:
    agent = Agent("a", model=ScriptedModel(["x"]), output_validators=[no_shouting])
    result = SyncDriver(agent).run("?")
    assert "tool_call" not in types(result.events)
    assert result.usage.tool_calls == 0


@pytest.mark.parametrize(
    ("validators", "problem"),
    [
        (no_shouting, "is a list of functions"),
        ([42], "not a function"),
        ([lambda output: output], "two positional arguments"),
        (7, "is a list of functions"),
    ],
)
def test_bad_validators_are_refused_when_the_agent_is_defined(
    validators: Any, problem: str
) -> None:
    with pytest.raises(AgentDefinitionError, match=problem):
        Agent("a", output_validators=validators)


# -- ModelRetry in a tool -----------------------------------------------------------------------


def test_a_tool_raising_model_retry_sends_its_message_to_the_model() -> None:
    tries: list[int] = []

    @tool
    def fetch(ctx: RunContext, url: str) -> str:
        """Fetch a page."""
        tries.append(ctx.retry)
        if not url.startswith("https://"):
            raise ModelRetry("Use an https:// URL.")
        return "<html>"

    model = ScriptedModel([call("fetch", url="x.org"), call("fetch", url="https://x.org"), "ok"])
    result = SyncDriver(Agent("a", model=model, tools=[fetch])).run("get x.org")
    first, second = tool_results(result.messages)
    assert first.is_error
    assert first.content == "Use an https:// URL."
    assert second.content == "<html>"
    assert tries == [0, 1]


def test_a_tool_asking_too_often_ends_the_run_after_its_step() -> None:
    @tool(max_retries=1)
    async def picky(ctx: RunContext) -> str:
        """Never satisfied."""
        raise ModelRetry("again")

    model = ScriptedModel([call("picky"), call("picky"), "never reached"])
    with pytest.raises(ToolRetriesExceeded, match="asked for a retry 2 times") as info:
        SyncDriver(Agent("a", model=model, tools=[picky])).run("?")
    # The second refusal is in the transcript before the run ends: it stays well formed.
    assert [m.content for m in tool_results(info.value.messages)] == ["again", "again"]
