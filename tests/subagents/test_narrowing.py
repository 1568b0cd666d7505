"""Least privilege per child: Subagent(tool_context=fn) narrows what a child (and below) gets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import (
    Agent,
    AgentContext,
    Answer,
    AssistantMessage,
    ModelResponse,
    Pending,
    Request,
    RunContext,
    Runtime,
    Subagent,
    ToolCall,
)
from actors import tool as make_tool
from actors.exceptions import AgentDefinitionError, UserError
from actors.loop._loop import AgentLoop
from actors.loop._types import CallModel, ModelReplied, RunChild, StartRun
from actors.store import MemoryStore
from actors.testing import ScriptedModel, SyncDriver, call

from .helpers import events_of, tool_results

SECRETS = {"search_key": "sk-search", "bank_password": "hunter2"}


def just_search(deps: Mapping[str, Any]) -> dict[str, Any]:
    return {"search_key": deps["search_key"]}


def seen_by(seen: dict[str, Any]) -> Any:
    """A tool that records the keys of the tool_context of the agent that calls it."""

    @make_tool
    def keys(ctx: RunContext[Any]) -> str:
        """Record the tool_context's keys."""
        seen[ctx.agent_id] = sorted(ctx.tool_context)
        return "ok"

    return keys


def tree(seen: dict[str, Any], *, narrow: Any = just_search, per_agent: bool = False) -> Agent:
    keys = seen_by(seen)
    leaf = Agent(
        "leaf", model=ScriptedModel([call("keys"), "leaf done"], per_agent=True), tools=[keys]
    )
    searcher = Agent(
        "searcher",
        model=ScriptedModel(
            [call("keys"), call("leaf", task="deeper"), "searched"], per_agent=per_agent
        ),
        tools=[keys],
        subagents=[leaf],  # not narrowed again: the leaf gets what the searcher got
    )
    return Agent(
        "lead",
        model=ScriptedModel([call("keys"), call("searcher", task="find"), "all done"]),
        tools=[keys],
        subagents=[Subagent(searcher, tool_context=narrow)],
    )


def test_a_child_and_its_descendants_get_the_narrowed_tool_context(rt: Runtime) -> None:
    seen: dict[str, Any] = {}
    result = rt.spawn(tree(seen), tool_context=SECRETS).run("?")
    assert result.output == "all done"
    assert seen == {
        "lead": ["bank_password", "search_key"],
        "lead-sub-1": ["search_key"],
        "lead-sub-1-sub-1": ["search_key"],
    }
    assert "hunter2" not in str(result.events)


@dataclass(frozen=True)
class Deps:
    token: str


def test_the_default_forwards_the_same_object(rt: Runtime) -> None:
    seen: list[Any] = []

    @make_tool
    def look(ctx: RunContext[Deps]) -> str:
        """Record the tool_context."""
        seen.append(ctx.tool_context)
        return "ok"

    child = Agent("child", model=ScriptedModel([call("look"), "done"]), tools=[look])
    lead = Agent("lead", model=ScriptedModel([call("child", task="go"), "ok"]), subagents=[child])
    deps = Deps("t")
    rt.spawn(lead, tool_context=deps).run("?")
    assert seen[0] is deps


def test_the_narrowing_function_sees_the_parent_read_only(rt: Runtime) -> None:
    def greedy(deps: Any) -> Any:
        deps["stolen"] = True  # raises: the parent's tool_context is read-only here too
        return deps

    seen: dict[str, Any] = {}
    secrets = dict(SECRETS)
    with capture_logs() as logs:
        ref = rt.spawn(tree(seen, narrow=greedy), tool_context=secrets)
        result = ref.run("?")
    assert secrets == SECRETS
    failed = tool_results(result.messages)[1]
    assert failed.is_error
    assert failed.content == (
        "Subagent 'searcher' was not started: its tool_context function failed "
        "(ToolContextReadOnlyError)."
    )
    assert events_of(result.events, "subagent_spawned") == []  # no child, no child id spent
    assert ref.tree().children == ()
    assert [e["subagent"] for e in logs if e["event"].startswith("narrowing")] == ["searcher"]
    assert result.output == "all done"  # the parent lives on


def test_a_failing_narrowing_keeps_secrets_out_of_the_transcript(rt: Runtime) -> None:
    def leaky(deps: Any) -> Any:
        raise ValueError(f"cannot narrow {deps['bank_password']}")

    seen: dict[str, Any] = {}
    with capture_logs():
        result = rt.spawn(tree(seen, narrow=leaky), tool_context=SECRETS).run("?")
    assert "hunter2" not in str(result.events)
    assert "(ValueError)" in tool_results(result.messages)[1].content


def test_the_sync_driver_narrows_the_same_way() -> None:
    seen: dict[str, Any] = {}
    SyncDriver(tree(seen), tool_context=SECRETS).run("?")
    assert seen["lead-sub-1"] == seen["lead-sub-1-sub-1"] == ["search_key"]


def test_the_loop_carries_the_childs_tool_context_in_its_effect() -> None:
    lead = Agent(
        "lead",
        model=ScriptedModel([]),
        subagents=[Subagent(Agent("s", model=ScriptedModel([])), tool_context=just_search)],
    )
    loop = AgentLoop(lead, AgentContext("lead"), model=ScriptedModel([]), tool_context=SECRETS)
    [ask] = loop.handle(StartRun("?", "r1"))
    assert isinstance(ask, CallModel)
    reply = AssistantMessage(tool_calls=(ToolCall(id="c1", name="s", arguments={"task": "t"}),))
    effects = loop.handle(ModelReplied("r1", ask.step, response=ModelResponse(message=reply)))
    [run_child] = [e for e in effects if isinstance(e, RunChild)]
    assert run_child.tool_context == {"search_key": "sk-search"}


def test_a_restored_kept_child_gets_the_narrowed_tool_context() -> None:
    store = MemoryStore()

    def build(seen: dict[str, Any]) -> Agent:
        keys = seen_by(seen)
        helper = Agent(
            "helper",
            model=ScriptedModel([call("keys"), "one", call("keys"), "two"], per_agent=True),
            tools=[keys],
        )
        return Agent(
            "lead",
            model=ScriptedModel(
                [call("helper", task="one"), "first", call("helper", task="two"), "second"],
                per_agent=True,
            ),
            subagents=[Subagent(helper, keep=True, tool_context=just_search)],
        )

    before: dict[str, Any] = {}
    with Runtime() as rt:
        rt.spawn(build(before), tool_context=SECRETS, store=store, session_id="s").run("?")
    after: dict[str, Any] = {}
    with Runtime() as rt:
        ref = rt.restore("s", store=store, agents=[build(after)], tool_context=SECRETS)
        assert ref.run("again").output == "second"
    assert before == after == {"lead-sub-1": ["search_key"]}


def test_a_restored_suspended_child_gets_the_narrowed_tool_context() -> None:
    store = MemoryStore()
    seen: list[list[str]] = []

    @make_tool
    def confirm(ctx: RunContext[Any]) -> Any:
        """Ask the host, then record the tool_context's keys."""
        if ctx.answer is None:
            return Pending(Request(kind="confirm", prompt="ok?"))
        seen.append(sorted(ctx.tool_context))
        return "confirmed"

    def build() -> Agent:
        child = Agent(
            "child", model=ScriptedModel([call("confirm"), "done"], per_agent=True), tools=[confirm]
        )
        return Agent(
            "lead",
            model=ScriptedModel([call("child", task="go"), "finished"], per_agent=True),
            subagents=[Subagent(child, tool_context=just_search)],
        )

    with Runtime() as rt:
        parked = rt.spawn(build(), tool_context=SECRETS, store=store, session_id="s").run("?")
    [request] = parked.requests
    with Runtime() as rt:
        ref = rt.restore("s", store=store, agents=[build()], tool_context=SECRETS)
        assert ref.resume({request.id: Answer(ok=True)}).output == "finished"
    assert seen == [["search_key"]]


def test_a_narrowing_that_fails_on_restore_fails_it_when_the_child_comes_back() -> None:
    def kept_tree(seen: dict[str, Any]) -> Agent:
        helper = Agent(
            "helper",
            model=ScriptedModel([call("keys"), "one"], per_agent=True),
            tools=[seen_by(seen)],
        )
        return Agent(
            "lead",
            model=ScriptedModel([call("helper", task="one"), "first"], per_agent=True),
            subagents=[Subagent(helper, keep=True, tool_context=just_search)],
        )

    store = MemoryStore()
    with Runtime() as rt:
        rt.spawn(kept_tree({}), tool_context=SECRETS, store=store, session_id="kept").run("?")
        rt.spawn(tree({}), tool_context=SECRETS, store=store, session_id="ended").run("?")
    with Runtime() as rt:
        # The kept helper comes back to life: its narrowing must work, or nothing restores.
        with pytest.raises(UserError, match="tool_context function of subagent 'helper'"):
            rt.restore("kept", store=store, agents=[kept_tree({})], tool_context={"other": 1})
        assert rt.live_agents() == 0
        # Children that ended stay ended: nothing of theirs is narrowed again.
        ref = rt.restore("ended", store=store, agents=[tree({})], tool_context={"other": 1})
        assert ref.tree().status == "idle"


def test_a_narrowing_function_must_be_callable() -> None:
    with pytest.raises(AgentDefinitionError, match="takes tool_context=a function"):
        Agent("lead", subagents=[Subagent(Agent("c"), tool_context={"a": 1})])  # type: ignore[arg-type]
