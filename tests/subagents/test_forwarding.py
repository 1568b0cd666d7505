"""What a child receives from its parent, what comes back, and what never does."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from actors import Agent, ContextUpdate, RunContext, Runtime, Subagent, UserMessage, tool
from actors.testing import FakeClock, ScriptedModel, SyncDriver, call

from .conftest import Answered
from .helpers import BOUND, events_of, tool_results, wait_stopped


@dataclass(frozen=True)
class Deps:
    secret: str
    connection: object


def test_child_sees_the_same_tool_context_and_the_metadata_as_at_spawn(rt: Runtime) -> None:
    seen: list[RunContext[Any]] = []

    @tool
    def inspect(ctx: RunContext[Deps]) -> tuple[str, ContextUpdate]:
        """Look at what the child got, and change the child's own metadata."""
        seen.append(ctx)
        return "seen", ContextUpdate().set("by_child", True).set("step", "child")

    @tool
    def parent_update() -> tuple[str, ContextUpdate]:
        """Change the parent's metadata in the same step as the spawn."""
        return "ok", ContextUpdate().set("step", "parent")

    child = Agent(
        "worker",
        instructions="You work.",
        model=ScriptedModel([call("inspect"), "worked"]),
        tools=[inspect],
    )
    parent = Agent(
        "boss",
        model=ScriptedModel([[call("parent_update"), call("worker", task="do it")], "all good"]),
        tools=[parent_update],
        subagents=[child],
    )
    deps = Deps("s3cr3t", object())
    ref = rt.spawn(parent, tool_context=deps, metadata={"user": {"id": 7}, "step": "start"})
    result = ref.run("go")
    assert result.output == "all good"
    (ctx,) = seen
    assert ctx.tool_context is deps  # the same object, not a copy
    # The metadata as it was when the parent's step started (the parent's own update of
    # that step is applied after its calls finish).
    assert ctx.metadata == {"user": {"id": 7}, "step": "start"}
    assert ctx.agent_id == "boss-sub-1"
    assert ctx.parent_id == "boss"
    # Nothing the child did reached the parent, except its result.
    assert ref.context().metadata == {"user": {"id": 7}, "step": "parent"}
    assert tool_results(result.messages)[1].content == "worked"


def test_child_starts_with_a_fresh_log_of_its_system_prompt_and_task(rt: Runtime) -> None:
    child_model = ScriptedModel(["done"])
    child = Agent("worker", system_prompt="You work.", instructions="Be brief.", model=child_model)
    parent = Agent(
        "boss",
        system_prompt="You lead.",
        instructions="Delegate.",
        model=ScriptedModel([call("worker", task="sum 1 and 2"), "ok"]),
        subagents=[child],
    )
    ref = rt.spawn(parent)
    ref.run("the parent's prompt")
    # The child's own prompts, none of its parent's: its logged system prompt, its overlay.
    assert [(m.role, m.content) for m in child_model.requests[0].messages] == [
        ("system", "You work.\n\nBe brief."),
        ("user", "sum 1 and 2"),
    ]
    assert [(m.role, m.content) for m in ref.context().messages][:2] == [
        ("system", "You lead."),
        ("user", "the parent's prompt"),
    ]


def test_ids_derive_from_the_parent_with_a_per_parent_counter(rt: Runtime) -> None:
    child = Agent("w", model=ScriptedModel(["a"], per_agent=True))
    parent = Agent(
        "root",
        model=ScriptedModel(
            [[call("w", task="1"), call("w", task="2")], call("w", task="3"), "done"]
        ),
        subagents=[child],
    )
    result = rt.spawn(parent).run("?")
    spawned = events_of(result.events, "subagent_spawned")
    assert [s["child_id"] for s in spawned] == ["root-sub-1", "root-sub-2", "root-sub-3"]
    assert [(s["name"], s["task"]) for s in spawned] == [("w", "1"), ("w", "2"), ("w", "3")]
    finished = events_of(result.events, "subagent_finished")
    assert [(f["child_id"], f["status"]) for f in finished] == [
        ("root-sub-1", "completed"),
        ("root-sub-2", "completed"),
        ("root-sub-3", "completed"),
    ]
    assert finished[0]["usage"]["requests"] == 1


def test_results_enter_in_call_order_when_children_finish_in_reverse(
    rt: Runtime, answered: Answered
) -> None:
    @tool
    def work(ctx: RunContext, name: str) -> str:  # type: ignore[type-arg]
        """Finish after the next sibling has answered the parent."""
        later = {"root-sub-1": "root-sub-2", "root-sub-2": "root-sub-3"}.get(ctx.agent_id)
        if later is not None:
            assert answered.of(later).wait(BOUND)
        return f"{name} from {ctx.agent_id}"

    child = Agent(
        "w",
        model=ScriptedModel([call("work", name="x"), "finished"], per_agent=True),
        tools=[work],
    )
    parent = Agent(
        "root",
        model=ScriptedModel([[call("w", task=f"t{i}") for i in range(3)], "done"]),
        subagents=[child],
    )
    result = rt.spawn(parent).run("?")
    results = tool_results(result.messages)
    assert [r.tool_call_id for r in results] == [
        c.id
        for c in parent.model.replies[0]  # type: ignore[union-attr]
    ]
    finished = events_of(result.events, "subagent_finished")
    assert [f["child_id"] for f in finished] == ["root-sub-1", "root-sub-2", "root-sub-3"]


def test_children_of_one_reply_run_concurrently(rt: Runtime) -> None:
    arrived = [threading.Event(), threading.Event()]

    @tool
    def meet(ctx: RunContext) -> bool:  # type: ignore[type-arg]
        """Both children must be running at once."""
        mine = int(ctx.agent_id[-1]) - 1
        arrived[mine].set()
        return arrived[1 - mine].wait(BOUND)

    child = Agent("w", model=ScriptedModel([call("meet"), "ok"], per_agent=True), tools=[meet])
    parent = Agent(
        "p",
        model=ScriptedModel([[call("w", task="a"), call("w", task="b")], "done"]),
        subagents=[child],
    )
    rt.spawn(parent).run("?")
    assert all(event.is_set() for event in arrived)


class Report(BaseModel):
    title: str
    pages: int


class Brief(BaseModel):
    topic: str
    depth: int


def test_structured_child_output_and_structured_input(rt: Runtime) -> None:
    child_model = ScriptedModel(['{"title": "Actors", "pages": 3}'])
    child = Agent("writer", model=child_model, output_type=Report)
    parent_model = ScriptedModel(
        [
            call("writer", task="write", input={"topic": "pykka", "depth": "deep"}),
            call("writer", task="write", input={"topic": "pykka", "depth": 2}),
            "done",
        ]
    )
    parent = Agent(
        "editor",
        model=parent_model,
        subagents=[Subagent(child, description="Writes reports.", input_type=Brief)],
    )
    result = rt.spawn(parent).run("?")
    invalid, report = tool_results(result.messages)
    assert invalid.is_error
    assert "input.depth" in invalid.content or "depth" in invalid.content
    assert json.loads(report.content) == {"title": "Actors", "pages": 3}
    definition = parent_model.requests[0].tools[0]
    assert definition.description == "Writes reports."
    assert definition.parameters["required"] == ["task", "input"]
    task = child_model.requests[0].messages[-1]
    assert isinstance(task, UserMessage)
    assert task.content.startswith("write\n\nInput:\n")
    assert json.loads(task.content.split("Input:\n", 1)[1]) == {"topic": "pykka", "depth": 2}


def test_a_missing_task_goes_back_to_the_model(rt: Runtime) -> None:
    child = Agent("w", model=ScriptedModel(["x"]))
    parent = Agent(
        "p",
        model=ScriptedModel([call("w"), call("w", task="real"), "done"]),
        subagents=[child],
    )
    result = rt.spawn(parent).run("?")
    error, ok = tool_results(result.messages)
    assert error.is_error
    assert "'task'" in error.content
    assert ok.content == "x"


def test_usage_rolls_up_through_the_tree(rt: Runtime) -> None:
    leaf = Agent("leaf", model=ScriptedModel(["leaf done"]))
    mid = Agent("mid", model=ScriptedModel([call("leaf", task="t"), "mid done"]), subagents=[leaf])
    root = Agent("root", model=ScriptedModel([call("mid", task="t"), "root done"]), subagents=[mid])
    result = rt.spawn(root).run("?")
    assert result.usage.requests == 2
    assert result.tree_usage.requests == 5
    assert result.tree_usage.tool_calls == 2
    mid_finished = events_of(result.events, "subagent_finished")[0]
    assert mid_finished["usage"]["requests"] == 3


def test_finished_children_are_stopped(rt: Runtime) -> None:
    child = Agent("w", model=ScriptedModel(["x"], per_agent=True))
    parent = Agent(
        "p",
        model=ScriptedModel([[call("w", task="a"), call("w", task="b")], "done"]),
        subagents=[child],
    )
    ref = rt.spawn(parent)
    ref.run("?")
    wait_stopped(rt, "p-sub-1", "p-sub-2")
    assert rt.live_agents() == 1
    statuses = {node.agent_id: node.status for node in ref.tree().walk()}
    assert statuses == {"p": "idle", "p-sub-1": "finished", "p-sub-2": "finished"}


def test_sync_driver_runs_subagents_with_the_same_log() -> None:
    script: list[Any] = [[call("leaf", task="a"), call("leaf", task="b")], "done"]

    def specs() -> Agent:
        leaf = Agent("leaf", model=ScriptedModel(["leaf"], per_agent=True))
        return Agent("root", model=ScriptedModel(script), subagents=[leaf])

    driver = SyncDriver(specs(), clock=FakeClock())
    driven = driver.run("?")
    with Runtime(clock=FakeClock()) as rt:
        ref = rt.spawn(specs())
        acted = ref.run("?")
        events = ref.context().events

    def plain(evs: Any) -> list[tuple[str, Any]]:
        return [(e.type, e.data) for e in evs]

    assert plain(driver.context.events) == plain(events)
    assert driven.tree_usage == acted.tree_usage
    assert sorted(driver.children) == ["root-sub-1", "root-sub-2"]
