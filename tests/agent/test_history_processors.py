"""History processors shape what each request shows the model; the transcript keeps everything."""

from __future__ import annotations

from typing import Any

import pytest

from actors import (
    Agent,
    AssistantMessage,
    Message,
    RunContext,
    Runtime,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    keep_last_turns,
    tool,
)
from actors.exceptions import AgentDefinitionError, RunFailedError, UserError
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import BOUND


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


def contents(messages: Any) -> list[str]:
    return [m.content for m in messages]


def test_keep_last_turns_shows_the_instructions_and_the_last_turns_only() -> None:
    model = ScriptedModel([f"answer {n}" for n in range(5)])
    agent = Agent(
        "a", model=model, instructions="Be brief.", history_processors=[keep_last_turns(2)]
    )
    driver = SyncDriver(agent)
    for n in range(5):
        result = driver.run(f"question {n}")
    assert contents(model.requests[-1].messages) == [
        "Be brief.",
        "question 3",
        "answer 3",
        "question 4",
    ]
    # The transcript, the result and the log keep every message: a view, not an edit.
    assert len(result.messages) == 10  # (the instructions are an overlay, never logged)
    assert "replace" not in [e.type for e in driver.context.events]
    header = [e for e in result.events if e.type == "request_header"][-1]
    assert header.data["history"] == {"sent": 4, "of": 9}


def test_a_tool_call_and_its_result_stay_together() -> None:
    model = ScriptedModel(
        [call("lookup", city="Oslo"), "sunny", call("lookup", city="Rome"), "also sunny"]
    )
    agent = Agent("a", model=model, tools=[lookup], history_processors=[keep_last_turns(1)])
    driver = SyncDriver(agent)
    driver.run("Oslo?")
    driver.run("Rome?")
    last = model.requests[-1].messages
    assert [type(m).__name__ for m in last] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
    ]
    assert last[0].content == "Rome?"


def test_keep_last_turns_never_cuts_between_a_call_and_its_result() -> None:
    # A user message between a call and its result (a transcript built by hand): cutting at
    # it would orphan the result, so the cut moves back to the turn before.
    messages: list[Message] = [
        SystemMessage(content="sys"),
        UserMessage(content="q1"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="lookup"),)),
        UserMessage(content="hurry"),
        ToolResultMessage(tool_call_id="c1", tool_name="lookup", content="ok"),
        AssistantMessage(content="done"),
    ]
    shown = keep_last_turns(1)(None, messages)  # type: ignore[arg-type]
    assert contents(shown) == contents(messages)
    short = [SystemMessage(content="sys"), UserMessage(content="only")]
    assert keep_last_turns(3)(None, short) == short  # type: ignore[arg-type]


def test_processors_run_in_order_and_see_the_run_context() -> None:
    seen: list[Any] = []

    def note(ctx: RunContext, messages: list[Message]) -> list[Message]:
        seen.append((ctx.agent_id, ctx.tool_context["tenant"], ctx.metadata.get("topic")))
        return [
            *messages[:-1],
            UserMessage(content=f"[{ctx.metadata['topic']}] {messages[-1].content}"),
        ]

    def last_only(ctx: RunContext, messages: list[Message]) -> list[Message]:
        return messages[-1:]

    model = ScriptedModel(["ok"])
    agent = Agent("a", model=model, history_processors=[note, last_only])
    driver = SyncDriver(agent, tool_context={"tenant": "acme"}, metadata={"topic": "billing"})
    driver.run("why?")
    assert contents(model.requests[0].messages) == ["[billing] why?"]
    assert seen == [("a", "acme", "billing")]
    assert contents(driver.context.messages) == ["why?", "ok"]


def test_processors_run_in_a_runtime_too() -> None:
    model = ScriptedModel(["1", "2", "3"])
    agent = Agent("a", model=model, history_processors=[keep_last_turns(1)])
    with Runtime() as runtime:
        ref = runtime.spawn(agent)
        for n in range(3):
            ref.run(f"q{n}", timeout=BOUND)
    assert contents(model.requests[-1].messages) == ["q2"]


def _failing(result: Any) -> Any:
    def processor(ctx: RunContext, messages: list[Message]) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    return processor


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        (ValueError("boom"), "raised ValueError: boom"),
        ((), "returned tuple; return a list of messages"),
        ([], "returned no messages"),
        (["hello"], "returned a str among the messages"),
        (
            [ToolResultMessage(tool_call_id="x", tool_name="t", content="r")],
            "kept the result of tool call 'x' but not the call",
        ),
        (
            [AssistantMessage(tool_calls=(ToolCall(id="y", name="t"),))],
            "kept tool call 'y' but not its result",
        ),
    ],
)
def test_a_processor_that_fails_or_returns_nonsense_fails_the_run(
    returned: Any, problem: str
) -> None:
    model = ScriptedModel(["never sent"])
    agent = Agent("a", model=model, history_processors=[_failing(returned)])
    with pytest.raises(RunFailedError, match="history processor 'processor' ") as info:
        SyncDriver(agent).run("hi")
    assert problem in str(info.value)
    assert model.requests == []  # nothing went to the model
    if isinstance(returned, Exception):
        assert info.value.__cause__ is returned


async def _summarise(ctx: RunContext, messages: list[Message]) -> list[Message]:
    return messages


@pytest.mark.parametrize(
    ("processors", "problem"),
    [
        ([_summarise], "is async"),
        ([lambda messages: messages], "two positional arguments"),
        ([None], "not a function"),
        (keep_last_turns(2), "is a list of functions"),
    ],
)
def test_bad_processors_are_refused_when_the_agent_is_defined(
    processors: Any, problem: str
) -> None:
    with pytest.raises(AgentDefinitionError, match=problem):
        Agent("a", history_processors=processors)


@pytest.mark.parametrize("n", [0, -1, 1.5, True])
def test_keep_last_turns_needs_a_positive_count(n: Any) -> None:
    with pytest.raises(UserError, match="positive number of turns"):
        keep_last_turns(n)


def test_the_docstring_examples_hold() -> None:
    import doctest

    import actors.loop._history

    assert doctest.testmod(actors.loop._history).failed == 0
