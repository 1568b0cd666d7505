"""A world with everything in play, for the determinism tests (run as a script, or imported).

Agents make parallel tool calls, call a subagent, send peer messages, park on requests that
world events answer, and hit a tool timeout and a subagent deadline; model latencies are drawn
from the simulation's random source.

    python tests/sim/world_full.py SEED   # the JSONL export on stdout
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from typing import Any

from actors import (
    Agent,
    Answer,
    ContextUpdate,
    ModelRequest,
    Pending,
    Request,
    RunContext,
    Subagent,
)
from actors.sim import SimRunFuture, Simulation
from actors.testing import ScriptedModel, call

PEOPLE = 6


@dataclass
class World:
    sim: Simulation
    posts: list[tuple[float, str, str]] = field(default_factory=list)
    runs: dict[str, SimRunFuture[Any]] = field(default_factory=dict)


def post(ctx: RunContext[World], text: str) -> str:
    """Post to the board.

    Args:
        text: What to post.
    """
    world = ctx.tool_context
    world.posts.append((world.sim.now, ctx.agent_id, text))
    return f"posted #{len(world.posts)}"


def count_posts(ctx: RunContext[World]) -> int:
    """How many posts the board holds."""
    return len(ctx.tool_context.posts)


def tell(ctx: RunContext[World], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Send a message to another person.

    Args:
        to: Their id.
        text: The message.
    """
    return f"told {to}", ContextUpdate().send(to, text).append("told", to)


def ask_moderator(ctx: RunContext[World], question: str) -> Any:
    """Ask the moderator (a world event answers).

    Args:
        question: The question.
    """
    if ctx.answer is not None:
        return f"moderator says {ctx.answer.data}"
    return Pending(Request(kind="input", prompt=question))


def slow_search(ctx: RunContext[World], query: str) -> str:
    """A search that takes longer than its timeout.

    Args:
        query: What to look for.
    """
    return "never seen"


def latency(request: ModelRequest, rng: random.Random) -> float:
    return round(rng.uniform(0.2, 3.0), 3)


def build(sim: Simulation) -> World:
    world = World(sim)
    helper = Agent(
        "helper",
        model=ScriptedModel(
            [call("post", text="helper note"), "helped"], latency=latency, per_agent=True
        ),
        tools=[post],
    )
    sleepy = Agent("sleepy", model=ScriptedModel(["late"], latency=500.0, per_agent=True))
    for i in range(PEOPLE):
        me, friend = f"p{i}", f"p{(i + 1) % PEOPLE}"
        script = [
            [
                call("post", text=f"hello from {me}"),
                call("count_posts"),
                call("tell", to=friend, text=f"hi {friend}"),
            ],
            call("helper", task="take a note"),
            call("ask_moderator", question="may I?"),
            [call("slow_search", query="x"), call("sleepy", task="wake up")],
            call("tell", to="nobody", text="lost"),
            "done",
            "thanks for the message",
            "again",
            "and again",
        ]
        spec = Agent(
            "person",
            model=ScriptedModel(script, latency=latency, per_agent=True),
            tools=[post, count_posts, tell, ask_moderator, slow_search],
            subagents=[helper, Subagent(sleepy, timeout=30.0)],
            on_message="queue" if i % 2 else "run",
        )
        sim.spawn(spec, agent_id=me, tool_context=world)

    def start() -> None:
        for i in range(PEOPLE):
            world.runs[f"p{i}"] = sim.ref(f"p{i}").run_async(f"start {i}")

    def moderate() -> None:
        for agent_id, future in sorted(world.runs.items()):
            if future.done() and future.result().status == "suspended":
                answers = {r.id: Answer(data=f"yes {agent_id}") for r in future.result().requests}
                world.runs[agent_id] = sim.ref(agent_id).resume_async(answers)

    sim.at(0.5, start)
    sim.every(7.0, moderate, start=7.0)
    sim.collect("posts", lambda: len(world.posts), every=10.0)
    return world


def main(seed: int) -> None:
    sim = Simulation(seed=seed, tool_duration={"post": 0.5, "slow_search": 120.0})
    build(sim)
    sim.run(until=400.0)
    sim.export_jsonl(sys.stdout)


if __name__ == "__main__":
    main(int(sys.argv[1]))
