"""Three-level trees and the live hierarchy of ``ref.tree()``."""

from __future__ import annotations

import threading
from typing import Any

from actors import Agent, ContextUpdate, RunContext, Runtime, tool
from actors.testing import ScriptedModel, call

from .helpers import BOUND, events_of, tool_results, wait_stopped


def test_three_levels_forward_context_and_bring_results_up(rt: Runtime) -> None:
    seen: list[RunContext[Any]] = []

    @tool
    def probe(ctx: RunContext) -> tuple[str, ContextUpdate]:  # type: ignore[type-arg]
        """Record what the leaf sees; change the leaf's metadata."""
        seen.append(ctx)
        return "probed", ContextUpdate().set("leaf_was_here", True)

    @tool
    def mid_note() -> tuple[str, ContextUpdate]:
        """Change the middle agent's metadata before it spawns the leaf."""
        return "noted", ContextUpdate().set("mid", "changed")

    leaf = Agent("leaf", model=ScriptedModel([call("probe"), "leaf result"]), tools=[probe])
    mid = Agent(
        "mid",
        model=ScriptedModel([call("mid_note"), call("leaf", task="go deeper"), "mid result"]),
        tools=[mid_note],
        subagents=[leaf],
    )
    root = Agent(
        "root", model=ScriptedModel([call("mid", task="go"), "root result"]), subagents=[mid]
    )
    deps = {"db": object()}
    ref = rt.spawn(root, tool_context=deps, metadata={"tenant": "acme"})
    result = ref.run("?")
    assert result.output == "root result"
    assert tool_results(result.messages)[0].content == "mid result"
    (ctx,) = seen
    assert ctx.agent_id == "root-sub-1-sub-1"
    assert ctx.parent_id == "root-sub-1"
    assert ctx.tool_context == deps  # a read-only view of the same object
    assert next(iter(ctx.tool_context.values())) is next(iter(deps.values()))
    # The leaf got the middle agent's metadata as of its spawn (a snapshot of a snapshot).
    assert ctx.metadata == {"tenant": "acme", "mid": "changed"}
    assert ref.context().metadata == {"tenant": "acme"}
    assert result.tree_usage.requests == 2 + 3 + 2
    (mid_finished,) = events_of(result.events, "subagent_finished")
    assert mid_finished["usage"]["requests"] == 5
    wait_stopped(rt, "root-sub-1", "root-sub-1-sub-1")
    assert rt.live_agents() == 1


def test_tree_shows_each_agent_status_step_and_tool_while_running(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block."""
        started.set()
        release.wait(BOUND)
        return "released"

    leaf = Agent("leaf", model=ScriptedModel([call("block"), "leaf done"]), tools=[block])
    mid = Agent("mid", model=ScriptedModel([call("leaf", task="t"), "mid done"]), subagents=[leaf])
    root = Agent("root", model=ScriptedModel([call("mid", task="t"), "root done"]), subagents=[mid])
    ref = rt.spawn(root)
    future = ref.run_async("?")
    try:
        assert started.wait(BOUND)
        tree = ref.tree()
        rows = [(n.agent_id, n.parent_id, n.name, n.status, n.step, n.tool) for n in tree.walk()]
        assert rows == [
            ("root", None, "root", "running", 1, "mid"),
            ("root-sub-1", "root", "mid", "running", 1, "leaf"),
            ("root-sub-1-sub-1", "root-sub-1", "leaf", "running", 1, "block"),
        ]
    finally:
        release.set()
    assert future.result(BOUND).output == "root done"
    wait_stopped(rt, "root-sub-1", "root-sub-1-sub-1")
    after = {n.agent_id: (n.status, n.tool) for n in ref.tree().walk()}
    assert after == {
        "root": ("idle", None),
        "root-sub-1": ("finished", None),
        "root-sub-1-sub-1": ("finished", None),
    }
