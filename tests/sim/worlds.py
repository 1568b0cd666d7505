"""Small worlds for the sweep and CLI tests (importable by worker processes)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from actors import Agent, ContextUpdate, RunContext, Tool
from actors.models import OpenAIChatModel
from actors.sim import Simulation, SimulationSettings
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


def relay(ctx: RunContext[dict[str, str]]) -> tuple[str, ContextUpdate]:
    """Pass a note to the next agent of the ring."""
    return "passed", ContextUpdate().send(ctx.tool_context[ctx.agent_id], "note")


@SimulationSettings(message_delay=45.0, tool_duration=5.0)
def relay_ring(sim: Simulation, agents: int = 3) -> None:
    """A note goes round a ring; how far it gets in a given time is up to the settings."""
    ids = [f"r{i}" for i in range(agents)]
    following = {agent_id: ids[(i + 1) % agents] for i, agent_id in enumerate(ids)}
    model = ScriptedModel([call("relay"), "ok"] * 200, latency=1.0, per_agent=True)
    spec = Agent("relay", model=model, tools=[Tool.from_function(relay)])
    for agent_id in ids:
        sim.spawn(spec, agent_id=agent_id, tool_context=following)
    sim.at(0.0, lambda: sim.ref(ids[0]).run_async("start the note"))
    sim.collect("events", lambda: sum(1 for _ in sim.events), every=60.0)


def askers(sim: Simulation, url: str, agents: int = 4) -> None:
    """Agents that each ask a real model (at ``url``) one question."""
    model = OpenAIChatModel("fake", base_url=url)
    for i in range(agents):
        sim.spawn(Agent("asker", model=model)).run_async(f"question {i}")


def not_a_world() -> Any:
    return None


def failing(sim: Simulation, agents: int = 1, fail: str = "2/2:raise", log: str = "") -> Counter:
    """The counter world, which fails as ``fail`` says for one seed and agent count.

    ``fail`` is ``"SEED/AGENTS:HOW"`` (several, comma-separated): ``raise`` raises, ``exit``
    ends the process with ``os._exit(1)``, ``kill`` SIGKILLs it (as the out-of-memory killer
    does). ``log``, when given, is a file each run appends its seed and agent count to as it
    starts (to count how often a run was started).
    """
    if log:
        with open(log, "a") as out:
            out.write(f"{sim.seed}/{agents}\n")
    for spec in fail.split(","):
        which, how = spec.split(":")
        if which != f"{sim.seed}/{agents}":
            continue
        if how == "raise":
            raise ValueError(f"no road out of town {sim.seed}")
        if how == "exit":
            os._exit(1)
        if how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
    return counter(sim, agents=agents)
