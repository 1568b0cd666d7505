"""Small worlds for the sweep and CLI tests (importable by worker processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors import Agent, RunContext, Tool
from actors.models import OpenAIChatModel
from actors.sim import Simulation
from actors.testing import ScriptedModel, call


@dataclass
class Counter:
    """The world: one number (an object: tools see a mapping tool_context read-only)."""

    count: int = 0


def bump(ctx: RunContext[Counter]) -> str:
    """Add one to the world's counter."""
    ctx.tool_context.count += 1
    return "ok"


BUMP = Tool.from_function(bump)


def counter(sim: Simulation, agents: int = 3, latency: float = 1.0) -> Counter:
    """``agents`` agents each bump a counter once a minute; the count is collected."""
    state = Counter()
    model = ScriptedModel([call("bump"), "ok"] * 50, latency=latency, per_agent=True)
    refs = [
        sim.spawn(Agent("bumper", model=model, tools=[BUMP]), tool_context=state)
        for _ in range(agents)
    ]

    def minute() -> None:
        for ref in refs:
            if ref.status == "idle":
                ref.run_async("bump")

    sim.every(60.0, minute)
    sim.collect("count", lambda: state.count, every=60.0)
    sim.collect("jitter", lambda: sim.rng.random(), every=60.0)
    return state


def interrupted(sim: Simulation) -> Counter:
    """The counter world, and a Ctrl-C at t=150 (as the interpreter raises it)."""
    state = counter(sim, agents=2)

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    sim.at(150.0, ctrl_c)
    return state


def askers(sim: Simulation, url: str, agents: int = 4) -> None:
    """Agents that each ask a real model (at ``url``) one question."""
    model = OpenAIChatModel("fake", base_url=url)
    for i in range(agents):
        sim.spawn(Agent("asker", model=model)).run_async(f"question {i}")


def not_a_world() -> Any:
    return None
