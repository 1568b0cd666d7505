"""Issue 25, item 10: a streamed child's end shows when the child ends (its result is still
applied in call order), and a timed-out child has one status, in the events and in the tree."""

from __future__ import annotations

import threading
from typing import Any

from actors import (
    Agent,
    Message,
    RunContext,
    Runtime,
    StreamEvent,
    Subagent,
    SubagentFinished,
    SubagentSpawned,
    ToolCallStarted,
    tool,
)
from actors.sim import Simulation
from actors.testing import FunctionModel, ScriptedModel, call

BOUND = 30.0


@tool
def note(ctx: RunContext[Any]) -> str:
    """Take a note."""
    return "noted"


def _fan_out(slow: Agent[Any], fast_latency: float = 0.0) -> Agent[Any]:
    # The slow child is called first: call order and completion order differ.
    fast = Agent("fast", model=ScriptedModel(["fast done"], latency=fast_latency))
    return Agent(
        "lead",
        model=ScriptedModel([[call("slow", task="a"), call("fast", task="b")], "done"]),
        subagents=[slow, fast],
    )


def _finished_in_log(events: Any) -> list[str]:
    return [e.data["child_id"] for e in events if e.type == "subagent_finished"]


def test_a_fast_childs_end_is_streamed_while_its_sibling_still_runs() -> None:
    # The slow child answers only once the reader has seen the fast child's end: before the
    # fix that end came with the whole step, after the slow child, so the wait timed out.
    fast_seen = threading.Event()
    waited: list[bool] = []

    def slow_reply(messages: list[Message], tools: Any) -> str:
        waited.append(fast_seen.wait(BOUND / 3))
        return "slow done"

    with Runtime() as rt:
        ref = rt.spawn(_fan_out(Agent("slow", model=FunctionModel(slow_reply))))
        names: dict[str, str] = {}
        events: list[StreamEvent] = []
        for event in ref.run_stream("go"):
            events.append(event)
            if isinstance(event, SubagentSpawned):
                names[event.child_id] = event.name
            if isinstance(event, SubagentFinished) and names.get(event.child_id) == "fast":
                fast_seen.set()
        log = ref.context().events
    assert waited == [True]
    finished = [e for e in events if isinstance(e, SubagentFinished)]
    assert [names[e.child_id] for e in finished] == ["fast", "slow"]  # once each
    assert all(e.agent_id == "lead" and e.path == ("lead",) for e in finished)
    # The log still takes the step's results in call order.
    assert _finished_in_log(log) == ["lead-sub-1", "lead-sub-2"]
    results = [e.data["content"] for e in log if e.type == "tool_result"]
    assert results == ["slow done", "fast done"]


def _sim_stream(seed: int) -> tuple[list[tuple[str, ...]], list[tuple[str, Any]]]:
    slow = Agent(
        "slow",
        model=ScriptedModel([call("note"), "slow done"], latency=5),
        tools=[note],
    )
    sim = Simulation(seed=seed)
    ref = sim.spawn(_fan_out(slow, fast_latency=0.5))
    shown: list[tuple[str, ...]] = []
    for event in ref.run_stream("go"):
        if isinstance(event, SubagentFinished):
            shown.append(("finished", event.child_id, event.status))
        elif isinstance(event, ToolCallStarted):
            shown.append(("tool", event.agent_id, event.tool_name))
    log = [(e.type, e.data) for e in ref.context().events]
    return shown, log


def test_in_a_simulation_the_end_is_streamed_at_its_virtual_time_and_stays_reproducible() -> None:
    shown, log = _sim_stream(7)
    # The fast child ends at 0.5 s, before the slow one calls its tool at 5 s.
    assert shown == [
        ("tool", "lead", "slow"),
        ("tool", "lead", "fast"),
        ("finished", "lead-sub-2", "completed"),
        ("tool", "lead-sub-1", "note"),
        ("finished", "lead-sub-1", "completed"),
    ]
    finished = [data["child_id"] for kind, data in log if kind == "subagent_finished"]
    assert finished == ["lead-sub-1", "lead-sub-2"]
    assert _sim_stream(7) == (shown, log)


def _timing_out() -> Agent[Any]:
    slow = Agent("slow", model=ScriptedModel(["too late"], latency=30))
    return Agent(
        "lead",
        model=ScriptedModel([call("slow", task="work"), "went on"]),
        subagents=[Subagent(slow, timeout=0.1)],
    )


def test_a_timed_out_child_failed_in_its_event_and_in_the_tree() -> None:
    with Runtime() as rt:
        ref = rt.spawn(_timing_out())
        result = ref.run("?", timeout=BOUND)
        tree = {node.agent_id: node.status for node in ref.tree().walk()}
    (finished,) = [e.data for e in result.events if e.type == "subagent_finished"]
    assert finished["status"] == "failed"
    assert tree["lead-sub-1"] == "failed"


def test_the_same_in_a_simulation() -> None:
    sim = Simulation(seed=1)
    ref = sim.spawn(_timing_out())
    result = ref.run("?")
    (finished,) = [e.data for e in result.events if e.type == "subagent_finished"]
    tree = {node.agent_id: node.status for node in ref.tree().walk()}
    assert finished["status"] == tree["lead-sub-1"] == "failed"
