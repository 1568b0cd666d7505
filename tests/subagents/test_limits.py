"""Limits against runaway trees: a refused spawn is an error result naming the limit."""

from __future__ import annotations

import asyncio
from typing import Any

from actors import Agent, Message, Runtime, ToolResultMessage, TreeLimits
from actors.testing import FunctionModel, ScriptedModel, SyncDriver, call

from .helpers import BOUND, events_of, tool_results


def _chain(depth: int) -> Agent:
    """A chain of agents, each calling the next once: level0 -> level1 -> ..."""
    agent = Agent(f"level{depth}", model=ScriptedModel(["bottom"]))
    for level in reversed(range(depth)):
        agent = Agent(
            f"level{level}",
            model=ScriptedModel([call(f"level{level + 1}", task="deeper"), f"level{level} done"]),
            subagents=[agent],
        )
    return agent


def test_max_depth_refuses_a_child_below_it() -> None:
    with Runtime(limits=TreeLimits(max_depth=2)) as rt:
        ref = rt.spawn(_chain(3))
        result = ref.run("?")
        ids = [node.agent_id for node in ref.tree().walk()]
    assert result.output == "level0 done"
    assert ids == ["level0", "level0-sub-1", "level0-sub-1-sub-1"]
    # The refusal happened two levels down; it shows in that agent's result to its parent.
    (level1,) = tool_results(result.messages)
    assert level1.content == "level1 done"


def test_max_depth_refusal_text_names_the_limit() -> None:
    driver = SyncDriver(_chain(2), limits=TreeLimits(max_depth=1))
    driver.run("?")
    level1 = driver.children["level0-sub-1"]
    (refused,) = tool_results(level1.context.messages)
    assert refused.is_error
    assert refused.content == "Subagent 'level2' was not started: max depth 1 reached."


def test_max_children_limits_live_children_per_agent() -> None:
    child = Agent("w", model=ScriptedModel(["ok"], per_agent=True))
    parent = Agent(
        "p",
        model=ScriptedModel(
            [[call("w", task=str(i)) for i in range(3)], call("w", task="4"), "done"]
        ),
        subagents=[child],
    )
    with Runtime(limits=TreeLimits(max_children=2)) as rt:
        result = rt.spawn(parent).run("?")
    contents = [r.content for r in tool_results(result.messages)]
    refusal = (
        "Subagent 'w' was not started: max live children per agent (2) reached: 2 children "
        "of this agent still running; start more once some have finished."
    )
    # The first step's children have finished when the second step spawns another one.
    assert contents == ["ok", "ok", refusal, "ok"]
    assert len(events_of(result.events, "subagent_spawned")) == 3
    assert result.output == "done"


def _echo_last_result(messages: list[Message], tools: Any) -> Any:
    """Call the one subagent, then answer with what came back (so the parent can see it)."""
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if not results:
        return call(tools[0].name, task="deeper")
    return results[-1].content


def test_max_agents_in_one_tree() -> None:
    # root -> mid -> leaf: mid is alive (it is the one asking) when the leaf is refused.
    leaf = Agent("leaf", model=ScriptedModel(["never"]))
    mid = Agent("mid", model=FunctionModel(_echo_last_result), subagents=[leaf])
    root = Agent("root", model=ScriptedModel([call("mid", task="go"), "done"]), subagents=[mid])
    with Runtime(limits=TreeLimits(max_agents=2)) as rt:
        result = rt.spawn(root).run("?")
    (from_mid,) = tool_results(result.messages)
    assert "Subagent 'leaf' (root-sub-1-sub-1) failed" in from_mid.content
    assert "max agents in one tree (2) reached" in from_mid.content
    assert result.output == "done"


def test_finished_children_free_their_place_in_the_tree() -> None:
    child = Agent("w", model=ScriptedModel(["ok"], per_agent=True))
    with Runtime(limits=TreeLimits(max_agents=2)) as rt:

        async def reply(messages: list[Message], tools: Any) -> Any:
            done = sum(isinstance(m, ToolResultMessage) for m in messages)
            if done == 1:
                # Ask for the second child only once the first one's thread is gone.
                node = rt._host.nodes.get("p-sub-1")
                if node is not None:
                    assert await asyncio.to_thread(node.ref.actor_stopped.wait, BOUND)
            return call("w", task=str(done)) if done < 2 else "done"

        ref = rt.spawn(Agent("p", model=FunctionModel(reply), subagents=[child]))
        result = ref.run("?")
    assert [r.content for r in tool_results(result.messages)] == ["ok", "ok"]


def test_default_limits_are_sensible() -> None:
    limits = TreeLimits()
    assert (limits.max_depth, limits.max_children, limits.max_agents) == (5, 100, 1000)
