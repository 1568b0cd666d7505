"""The agent loop through a runtime: events, limits, tool errors, retries, conversations."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import (
    Agent,
    AgentContext,
    AssistantMessage,
    ContextUpdate,
    Event,
    RunContext,
    Runtime,
    ToolCall,
    UsageLimits,
    UserMessage,
    tool,
)
from actors.exceptions import (
    LimitExceededError,
    MaxIterationsExceeded,
    RunFailedError,
    ToolRetriesExceeded,
    UsageLimitExceeded,
    UserError,
)
from actors.loop._loop import AgentLoop
from actors.loop._types import (
    CallModel,
    CallTool,
    Finish,
    ModelReplied,
    StartRun,
    ToolFinished,
    ToolOutcome,
)
from actors.models import INVALID_ARGUMENTS_KEY
from actors.models._model import ModelResponse
from actors.testing import FakeClock, ScriptedModel, call

from .helpers import BOUND, plain, tool_results, types


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def fail(message: str) -> str:
    """Always fails."""
    raise ValueError(message)


def test_one_tool_call_then_an_answer_logs_every_event(rt: Runtime) -> None:
    model = ScriptedModel([call("add", a=1, b=2), "3"], name="scripted-v1")
    agent = Agent(
        "calc",
        model=model,
        system_prompt="You add.",
        tools=[add],
        model_settings={"temperature": 0.0},
    )
    result = rt.spawn(agent).run("1+2?")
    assert (result.status, result.output) == ("completed", "3")
    assert types(result.events) == [
        "turn_start",
        "system_message",
        "user_message",
        "step_start",
        "request_header",
        "usage",
        "assistant_message",
        "step_end",
        "tool_call",
        "tool_result",
        "step_start",
        "request_header",
        "usage",
        "assistant_message",
        "step_end",
        "turn_end",
    ]
    by_type = {e.type: e.data for e in result.events}
    assert by_type["request_header"] == {"model": "scripted-v1", "settings": {"temperature": 0.0}}
    assert by_type["tool_call"]["name"] == "add"
    assert by_type["tool_call"]["arguments"] == {"a": 1, "b": 2}
    assert by_type["turn_end"] == {"run_id": result.run_id, "reason": "completed"}
    assert by_type["step_end"]["model"] == "scripted-v1"
    assert result.usage.requests == 2
    assert result.usage.tool_calls == 1
    assert result.run_id == "calc-run-1"
    model.assert_complete()


def test_second_run_continues_the_conversation(rt: Runtime) -> None:
    model = ScriptedModel(["Hello Ada.", "Your name is Ada."])
    ref = rt.spawn(Agent("chat", model=model))
    first = ref.run("I am Ada.")
    second = ref.run("What is my name?")
    assert second.output == "Your name is Ada."
    seen = [m.content for m in model.requests[1].messages]
    assert seen == ["I am Ada.", "Hello Ada.", "What is my name?"]
    assert second.run_id == "chat-run-2"
    assert second.events[0].seq == first.events[-1].seq + 1
    assert len(second.messages) == 4


def test_a_second_run_while_one_is_in_flight_is_refused(rt: Runtime) -> None:
    import threading

    release = threading.Event()

    @tool
    def wait() -> str:
        """Wait."""
        release.wait(10)
        return "ok"

    ref = rt.spawn(Agent("busy", model=ScriptedModel([call("wait"), "done"]), tools=[wait]))
    future = ref.run_async("go")
    with pytest.raises(UserError, match="running"):
        ref.run("again")
    release.set()
    assert future.result(10).output == "done"


# -- tool errors and retries ---------------------------------------------------------------------


def test_invalid_arguments_become_an_error_result_naming_the_problem(rt: Runtime) -> None:
    model = ScriptedModel([call("add", a="one", b=2), call("add", a=1, b=2), "3"])
    result = rt.spawn(Agent("calc", model=model, tools=[add])).run("?")
    first, second = tool_results(result.messages)
    assert first.is_error
    assert "'add'" in first.content
    assert "a: Input should be a valid integer" in first.content
    assert (second.content, second.is_error) == ("3", False)
    # An invalid call never ran: only the valid one is logged as a tool call.
    assert [e.data["arguments"] for e in result.events if e.type == "tool_call"] == [
        {"a": 1, "b": 2}
    ]


def test_missing_and_extra_arguments_are_named(rt: Runtime) -> None:
    model = ScriptedModel([call("add", a=1, c=3), "ok"])
    result = rt.spawn(Agent("calc", model=model, tools=[add])).run("?")
    error = tool_results(result.messages)[0].content
    assert "b: Field required" in error
    assert "c: Extra inputs are not permitted" in error


def test_unknown_tool_names_the_available_tools(rt: Runtime) -> None:
    model = ScriptedModel([call("multiply", a=1), "ok"])
    result = rt.spawn(Agent("calc", model=model, tools=[add, fail])).run("?")
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert error.content == "Unknown tool 'multiply'. Available tools: add, fail."


def test_arguments_that_were_not_json_are_shown_back_to_the_model(rt: Runtime) -> None:
    broken = ToolCall(id="c1", name="add", arguments={INVALID_ARGUMENTS_KEY: '{"a": 1,'})
    model = ScriptedModel([broken, "ok"])
    result = rt.spawn(Agent("calc", model=model, tools=[add])).run("?")
    error = tool_results(result.messages)[0]
    assert error.is_error
    assert "not a JSON object" in error.content
    assert '{"a": 1,' in error.content
    assert INVALID_ARGUMENTS_KEY not in error.content


def test_the_loop_knows_the_providers_marker_for_unreadable_arguments() -> None:
    from actors.loop import _loop

    assert _loop.INVALID_ARGUMENTS_KEY == INVALID_ARGUMENTS_KEY


def test_past_the_retry_budget_the_run_fails_with_a_typed_error(rt: Runtime) -> None:
    model = ScriptedModel([call("add", a="x", b=1), call("add", a="y", b=1)])
    ref = rt.spawn(Agent("calc", model=model, tools=[add], tool_retries=1))
    with pytest.raises(ToolRetriesExceeded, match="'add' failed 2 times") as info:
        ref.run("?")
    assert len(tool_results(info.value.messages)) == 2
    assert info.value.agent_id == "calc"


def test_per_tool_retry_budget_overrides_the_agent_default(rt: Runtime) -> None:
    strict = tool(max_retries=0)(add.function)
    ref = rt.spawn(Agent("calc", model=ScriptedModel([call("add", a="x")]), tools=[strict]))
    with pytest.raises(ToolRetriesExceeded, match="retry budget 0"):
        ref.run("?")


def test_unknown_tools_count_against_the_budget(rt: Runtime) -> None:
    model = ScriptedModel([call("nope"), call("nope")])
    with pytest.raises(ToolRetriesExceeded, match="'nope'"):
        rt.spawn(Agent("calc", model=model, tools=[add])).run("?")


def test_retry_counter_reaches_the_tool(rt: Runtime) -> None:
    seen: list[int] = []

    @tool
    def count(ctx: RunContext, n: int) -> str:  # type: ignore[type-arg]
        """Count."""
        seen.append(ctx.retry)
        return "ok"

    model = ScriptedModel([call("count", n="x"), call("count", n=1), "done"])
    rt.spawn(Agent("c", model=model, tools=[count], tool_retries=2)).run("?")
    assert seen == [1]


def test_an_exception_in_a_tool_is_an_error_result_and_the_run_goes_on(rt: Runtime) -> None:
    model = ScriptedModel([[call("fail", message="disk full"), call("add", a=1, b=1)], "sorry"])
    with capture_logs() as logs:
        result = rt.spawn(Agent("calc", model=model, tools=[add, fail])).run("?")
    assert result.output == "sorry"
    error, ok = tool_results(result.messages)
    assert (error.content, error.is_error) == ("ValueError: disk full", True)
    assert "Traceback" not in error.content
    assert (ok.content, ok.is_error) == ("2", False)
    raised = [entry for entry in logs if entry["event"] == "tool raised"]
    assert len(raised) == 1
    assert raised[0]["tool"] == "fail"
    assert raised[0]["agent_id"] == "calc"
    # The exception reaches the log as text (type, message, traceback without locals), never as
    # an object a renderer could print the frames' locals of.
    assert "exc_info" not in raised[0]
    assert (raised[0]["error_type"], raised[0]["error"]) == ("ValueError", "disk full")
    assert raised[0]["exception"].startswith("Traceback (most recent call last):")
    assert "raise ValueError" in raised[0]["exception"]


def test_a_tool_that_raises_timeout_error_itself_is_not_reported_as_timed_out(
    rt: Runtime,
) -> None:
    @tool
    def flaky() -> str:
        """Talks to a slow service."""
        raise TimeoutError("the service did not answer")

    model = ScriptedModel([call("flaky"), "ok"])
    with capture_logs():
        result = rt.spawn(Agent("a", model=model, tools=[flaky], tool_timeout=30)).run("?")
    error = tool_results(result.messages)[0]
    assert error.content == "TimeoutError: the service did not answer"


# -- limits --------------------------------------------------------------------------------------


def _looping_model(n: int) -> ScriptedModel:
    return ScriptedModel([call("add", a=i, b=i) for i in range(n)])


def test_max_iterations_raises_with_the_partial_transcript_and_usage(rt: Runtime) -> None:
    ref = rt.spawn(Agent("loop", model=_looping_model(3), tools=[add], max_iterations=2))
    with pytest.raises(MaxIterationsExceeded, match="max_iterations=2") as info:
        ref.run("?")
    error = info.value
    assert isinstance(error, LimitExceededError)
    assert [r.content for r in tool_results(error.messages)] == ["0", "2"]
    assert error.usage is not None
    assert (error.usage.requests, error.usage.tool_calls) == (2, 2)
    assert error.agent_id == "loop"
    events = ref.context().events
    assert events[-1].type == "turn_end"
    assert events[-1].data["reason"] == "limit"
    assert events[-2].type == "error"
    assert events[-2].data["type"] == "MaxIterationsExceeded"


@pytest.mark.parametrize(
    ("limits", "needle"),
    [
        (UsageLimits(requests=1), "requests=1"),
        (UsageLimits(tool_calls=1), "tool_calls=1"),
        (UsageLimits(input_tokens=1), "input_tokens=1"),
        (UsageLimits(output_tokens=1), "output_tokens=1"),
        (UsageLimits(total_tokens=3), "total_tokens=3"),
    ],
)
def test_usage_limits_raise_with_partial_work(
    rt: Runtime, limits: UsageLimits, needle: str
) -> None:
    model = ScriptedModel([[call("add", a=1, b=1), call("add", a=2, b=2)], "done"])
    ref = rt.spawn(Agent("lim", model=model, tools=[add], usage_limits=limits))
    with pytest.raises(UsageLimitExceeded, match=needle) as info:
        ref.run("count please")
    error = info.value
    assert error.usage is not None
    assert error.usage.requests >= 1
    assert any(isinstance(m, UserMessage) for m in error.messages)
    # The transcript stays well formed: every tool call has a result.
    calls = [c.id for m in error.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert {r.tool_call_id for r in tool_results(error.messages)} == set(calls)


def test_the_actor_stays_usable_after_a_limit(rt: Runtime) -> None:
    model = ScriptedModel([call("add", a=1, b=1), "fine"])
    ref = rt.spawn(Agent("lim", model=model, tools=[add], max_iterations=1))
    with pytest.raises(MaxIterationsExceeded):
        ref.run("first")
    assert ref.status == "idle"
    # The limit is per run: the next run starts counting again, on the same transcript.
    result = ref.run("second")
    assert result.output == "fine"
    assert [m.content for m in result.messages if isinstance(m, UserMessage)] == [
        "first",
        "second",
    ]


def test_usage_limits_apply_per_run(rt: Runtime) -> None:
    model = ScriptedModel(["one", "two"])
    ref = rt.spawn(Agent("lim", model=model, usage_limits=UsageLimits(requests=1)))
    assert ref.run("a").output == "one"
    assert ref.run("b").output == "two"


def test_model_failure_fails_the_run_with_its_cause(rt: Runtime) -> None:
    model = ScriptedModel([ConnectionError("provider down")])
    with pytest.raises(RunFailedError, match="provider down") as info:
        rt.spawn(Agent("m", model=model)).run("?")
    assert isinstance(info.value.__cause__, ConnectionError)


def test_model_past_its_timeout_fails_the_run_saying_so(rt: Runtime) -> None:
    model = ScriptedModel(["never"], latency=30)
    with pytest.raises(RunFailedError, match=r"model request timed out after 0\.05 s"):
        rt.spawn(Agent("m", model=model, model_timeout=0.05)).run("?", timeout=BOUND)


def test_a_model_raising_timeout_error_itself_is_reported_as_it_is(rt: Runtime) -> None:
    model = ScriptedModel([TimeoutError("upstream gateway")])
    with pytest.raises(RunFailedError, match="TimeoutError: upstream gateway"):
        rt.spawn(Agent("m", model=model, model_timeout=30)).run("?")


# -- updates and events ----------------------------------------------------------------------------


def test_updates_apply_and_tools_of_a_step_share_one_snapshot(rt: Runtime) -> None:
    seen: list[Any] = []

    @tool
    def bump(ctx: RunContext) -> tuple[str, ContextUpdate]:  # type: ignore[type-arg]
        """Bump the counter."""
        seen.append(ctx.metadata["n"])
        return "ok", ContextUpdate().set("n", ctx.metadata["n"] + 1)

    model = ScriptedModel([[call("bump"), call("bump")], call("bump"), "done"])
    ref = rt.spawn(Agent("b", model=model, tools=[bump]), metadata={"n": 0})
    result = ref.run("?")
    assert seen == [0, 0, 1]
    assert result.metadata["n"] == 2
    assert ref.context().metadata == {"n": 2}


def test_subscribe_delivers_each_event_as_it_is_appended(rt: Runtime) -> None:
    received: list[Event] = []
    ref = rt.spawn(
        Agent("s", model=ScriptedModel([call("add", a=1, b=1), "2", "again"]), tools=[add])
    )
    unsubscribe = ref.subscribe(lambda event: received.append(event))  # type: ignore[arg-type]
    result = ref.run("?")
    assert received == list(result.events)
    unsubscribe()
    ref.run("more")
    assert received == list(result.events)


def test_a_failing_subscriber_does_not_break_the_agent(rt: Runtime) -> None:
    ref = rt.spawn(Agent("s", model=ScriptedModel(["ok"])))

    def broken(event: Any) -> None:
        raise RuntimeError("listener bug")

    ref.subscribe(broken)
    with capture_logs() as logs:
        assert ref.run("?").output == "ok"
    assert any(e["event"] == "event listener failed" for e in logs)


def test_logs_carry_the_agent_id(rt: Runtime) -> None:
    with capture_logs() as logs:
        ref = rt.spawn(
            Agent("logged", model=ScriptedModel([call("fail", message="x"), "ok"]), tools=[fail])
        )
        ref.run("?")
    assert any(e.get("agent_id") == "logged" for e in logs)


# -- the state machine alone ----------------------------------------------------------------------


def _drive_reversed(order: list[int]) -> list[tuple[str, dict[str, Any]]]:
    """Feed the loop a reply with three tool calls and complete them in ``order``."""

    @tool
    def note(text: str) -> str:
        """Note."""
        return text

    agent = Agent("sm", tools=[note])
    loop = AgentLoop(agent, AgentContext("sm", clock=FakeClock()), model=ScriptedModel([]))
    (effect,) = loop.handle(StartRun("go", "run-1", reply="host"))
    assert isinstance(effect, CallModel)
    calls = tuple(ToolCall(id=f"c{i}", name="note", arguments={"text": str(i)}) for i in range(3))
    reply = ModelResponse(AssistantMessage(tool_calls=calls))
    effects = loop.handle(ModelReplied("run-1", 1, response=reply))
    assert [type(e) for e in effects] == [CallTool, CallTool, CallTool]
    assert loop.status == "running"
    for i in order:
        update = ContextUpdate().append("seen", i)
        done = loop.handle(ToolFinished("run-1", f"c{i}", ToolOutcome(str(i), update=update)))
        if i != order[-1]:
            assert done == []  # nothing is applied until every call of the step is in
    (effect,) = done
    assert isinstance(effect, CallModel)
    (finish,) = loop.handle(
        ModelReplied("run-1", 2, response=ModelResponse(AssistantMessage(content="ok")))
    )
    assert isinstance(finish, Finish)
    assert finish.result is not None
    assert finish.result.metadata["seen"] == (0, 1, 2)
    assert loop.status == "idle"
    return plain(loop.ctx.events)


def test_state_machine_applies_results_in_call_order_whatever_the_completion_order() -> None:
    assert _drive_reversed([0, 1, 2]) == _drive_reversed([2, 1, 0]) == _drive_reversed([1, 2, 0])


def test_state_machine_discards_stale_inputs() -> None:
    loop = AgentLoop(Agent("sm"), AgentContext("sm"), model=ScriptedModel([]))
    assert loop.handle(ToolFinished("nope", "c1", ToolOutcome("x"))) == []
    loop.handle(StartRun("go", "run-1", reply="host"))
    before = len(loop.ctx.events)
    stale = ModelResponse(AssistantMessage(content="old"))
    assert loop.handle(ModelReplied("run-0", 1, response=stale)) == []
    assert loop.handle(ModelReplied("run-1", 7, response=stale)) == []
    assert len(loop.ctx.events) == before


def test_a_call_past_its_budget_ends_the_run_before_any_call_of_the_reply_starts(
    rt: Runtime,
) -> None:
    ran: list[str] = []

    @tool
    def record(tag: str) -> str:
        """Record."""
        ran.append(tag)
        return tag

    child = Agent("child", model=ScriptedModel(["never"]))
    model = ScriptedModel([[call("record", tag="first"), call("child", task="t"), call("nope")]])
    agent = Agent("a", model=model, tools=[record], subagents=[child], tool_retries=0)
    with capture_logs() as logs, pytest.raises(ToolRetriesExceeded) as info:
        rt.spawn(agent).run("?")
    assert ran == []
    assert rt.live_agents() == 1
    results = tool_results(info.value.messages)
    assert len(results) == 3
    assert all(r.is_error and "not executed" in r.content for r in results)
    assert not any(e["event"] == "effect failed" for e in logs)
