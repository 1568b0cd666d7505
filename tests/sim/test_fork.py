"""`Simulation.fork`: a what-if from the current virtual time, running nothing again."""

from __future__ import annotations

from typing import Any

from actors import Agent
from actors.context._messages import Message
from actors.loop._recovery import OUTCOME_UNKNOWN
from actors.sim import Simulation
from actors.testing import FunctionModel, call


def _echo(log: list[str]) -> FunctionModel:
    def reply(messages: list[Message], tools: Any) -> str:
        log.append(str(messages[-1].content))
        return f"re: {messages[-1].content}"

    return FunctionModel(reply, latency=2.0)


def test_a_fork_starts_at_the_same_time_and_asks_nothing_again() -> None:
    asked: list[str] = []
    sim = Simulation(seed=1)
    ref = sim.spawn(Agent("chat", model=_echo(asked)), agent_id="chat")
    assert ref.run("one").output == "re: one"
    assert sim.now == 2.0
    fork = sim.fork(seed=2)
    assert fork.now == 2.0
    assert asked == ["one"]  # bringing the fork up asked the model nothing
    branch = fork.ref("chat")
    assert branch.run("two").output == "re: two"
    assert fork.now == 4.0
    assert asked == ["one", "two"]
    users = [m.content for m in branch.context().messages if m.role == "user"]
    assert users == ["one", "two"]
    # The original goes on by itself.
    assert ref.run("three").output == "re: three"
    assert [m.content for m in ref.context().messages if m.role == "user"] == ["one", "three"]


def _world_run(seed: int) -> tuple[list[tuple[str, str, dict[str, Any]]], list[str]]:
    sim = Simulation(seed=0)
    helper = Agent("helper", model=FunctionModel(lambda m, t: "found", latency=5.0))
    lead = Agent(
        "lead",
        model=FunctionModel(
            lambda m, t: [call("helper", task="look")] if m[-1].role == "user" else "done",
            latency=1.0,
        ),
        subagents=[helper],
    )
    ref = sim.spawn(lead, agent_id="lead")
    ref.run_async("go")
    sim.run(until=3.0)  # the helper's model request is in flight (its reply is due at 6)
    fork = sim.fork(seed=seed)
    assert fork.now == 3.0
    fork.run()
    tools = [str(m.content) for m in fork.ref("lead").context().messages if m.role == "tool"]
    return [(agent, e.type, e.data) for agent, e in fork.events], tools


def test_a_fork_mid_flight_decides_what_was_in_flight_and_is_reproducible() -> None:
    log, tools = _world_run(seed=7)
    assert (log, tools) == _world_run(seed=7)  # the same seed: the same log
    assert tools == [OUTCOME_UNKNOWN]  # the helper's call was in flight at the fork
    assert [kind for _, kind, _ in log] == []  # decided on restore; nothing ran again
