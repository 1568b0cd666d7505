"""Requests from deep in the tree surface at the root with their path, and are answered there."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Agent, Answer, Runtime, ToolResultMessage
from actors.exceptions import UnknownRequestError
from actors.testing import ScriptedModel, call

from .helpers import CALLS, ask, events_of, tool_results, wait_stopped


@pytest.fixture(autouse=True)
def _clear() -> None:
    CALLS.clear()


def _three_levels() -> Agent:
    leaf = Agent(
        "leaf",
        model=ScriptedModel([call("ask", question="budget?"), "leaf: budget noted"]),
        tools=[ask],
    )
    mid = Agent(
        "mid", model=ScriptedModel([call("leaf", task="get budget"), "mid done"]), subagents=[leaf]
    )
    return Agent(
        "root", model=ScriptedModel([call("mid", task="plan"), "root done"]), subagents=[mid]
    )


def test_request_three_levels_down_surfaces_at_the_root_and_is_answered_there(rt: Runtime) -> None:
    ref = rt.spawn(_three_levels())
    suspended = ref.run("?")
    assert suspended.status == "suspended"
    (request,) = suspended.requests
    assert request.agent_id == "root-sub-1-sub-1"
    assert request.path == ("root", "root-sub-1", "root-sub-1-sub-1")
    assert request.prompt == "budget?"
    # The root's call that spawned the child stays open: no result for it yet.
    assert tool_results(suspended.messages) == []
    assert not events_of(suspended.events, "subagent_finished")
    statuses = {n.agent_id: n.status for n in ref.tree().walk()}
    assert statuses == {
        "root": "suspended",
        "root-sub-1": "suspended",
        "root-sub-1-sub-1": "suspended",
    }
    assert rt.live_agents() == 3

    result = ref.resume({request.id: Answer(data=5000)})
    assert result.status == "completed"
    assert result.output == "root done"
    assert [("budget?", None), ("budget?", Answer(data=5000))] == CALLS
    (mid_result,) = tool_results(result.messages)
    assert mid_result.content == "mid done"
    (finished,) = events_of(result.events, "subagent_finished")
    assert finished["status"] == "completed"
    assert finished["usage"]["requests"] == 4  # mid 2 + leaf 2, over the whole child run
    # Counted once, though the child reported its usage when it suspended and again at the end.
    assert result.tree_usage.requests == 6
    assert result.usage.requests == 2
    wait_stopped(rt, "root-sub-1", "root-sub-1-sub-1")


def test_unknown_ids_at_depth_change_nothing(rt: Runtime) -> None:
    ref = rt.spawn(_three_levels())
    (request,) = ref.run("?").requests
    with pytest.raises(UnknownRequestError):
        ref.resume({request.id + "-typo": Answer()})
    assert ref.resume({request.id: Answer(data=1)}).output == "root done"


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_parallel_children_suspended_are_independent(rt: Runtime, order: tuple[int, int]) -> None:
    asker = Agent(
        "asker",
        model=ScriptedModel([call("ask", question="q"), "answered"], per_agent=True),
        tools=[ask],
    )
    root = Agent(
        "root",
        model=ScriptedModel([[call("asker", task="one"), call("asker", task="two")], "done"]),
        subagents=[asker],
    )
    ref = rt.spawn(root)
    requests = ref.run("?").requests
    assert [r.agent_id for r in requests] == ["root-sub-1", "root-sub-2"]
    first, second = (requests[i] for i in order)
    partial = ref.resume({first.id: Answer(data="x")})
    assert partial.status == "suspended"
    assert [r.id for r in partial.requests] == [second.id]
    result = ref.resume({second.id: Answer(data="y")})
    assert result.status == "completed"
    results: list[ToolResultMessage] = tool_results(result.messages)
    assert [r.content for r in results] == ["answered", "answered"]
    # A resumed call's result enters when the host's answer lets it finish: the log follows
    # the order of the answers (an input), so it is reproducible.
    calls = root.model.replies[0]  # type: ignore[union-attr]
    assert [r.tool_call_id for r in results] == [calls[i].id for i in order]  # type: ignore[index]
    assert result.tree_usage.requests == 2 + 2 * 2


def test_a_child_and_its_parent_suspended_together(rt: Runtime) -> None:
    asker = Agent(
        "asker", model=ScriptedModel([call("ask", question="child q"), "child done"]), tools=[ask]
    )
    root = Agent(
        "root",
        model=ScriptedModel([[call("asker", task="t"), call("ask", question="root q")], "done"]),
        tools=[ask],
        subagents=[asker],
    )
    ref = rt.spawn(root)
    requests: Any = {r.prompt: r for r in ref.run("?").requests}
    assert requests["root q"].path == ("root",)
    assert requests["child q"].path == ("root", "root-sub-1")
    result = ref.resume({r.id: Answer(data=r.prompt) for r in requests.values()})
    assert result.output == "done"
    assert sorted(r.content for r in tool_results(result.messages)) == [
        "child done",
        "root q -> root q",
    ]
