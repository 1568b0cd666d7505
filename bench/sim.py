"""The simulator: agent-steps per second, 100,000 agents in one simulation, sweep overlap.

    .venv/bin/python -m bench.sim [--quick] [--json PATH]

- steps/s: 10,000 agents in a ring, scripted models; every virtual second each agent runs
  once: one step calls a tool that sends its neighbour a peer message, a second step answers.
  A step is one model request and its tool calls (issue 15's target: >= 25,000/s on one core).
- 100,000 agents: spawned into one simulation (RSS per agent, spawn time per agent), then every
  agent runs the same two steps once (steps/s at that size). Events are not kept for export
  here (``record_events=False``); each agent's own log is.
- sweep: one simulation of a 2,000-agent world, then `sweep` over 8 seeds in processes: the
  wall time against 8 x one (overlap on the machine's cores).
- replay: the ring (2,000 agents, each prompt naming its agent, so every request is its own)
  recorded through `CachedModel` into a SQLite file, then replayed from it alone
  (``mode="replay"``, no inner model): agent-steps/s of the replay (issue 31's target:
  >= 20,000/s), beside the same ring with the scripted model in the same process.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import (
    Agent,
    AssistantMessage,
    ContextUpdate,
    ModelRequest,
    ModelResponse,
    RunContext,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from actors.models import CachedModel
from actors.sim import Simulation, sweep
from actors.testing import ScriptedModel
from bench._common import finish, parser, rss_bytes

STEPS_TARGET = 25_000
REPLAY_TARGET = 20_000


def tell(ctx: RunContext[dict[str, str]]) -> tuple[str, ContextUpdate]:
    """Tell the next agent of the ring."""
    return "sent", ContextUpdate().send(ctx.tool_context[ctx.agent_id], "hi")


TELL = Tool.from_function(tell)


class ConstantModel:
    """The ring's two replies at a constant cost: what the loop costs without a test model.

    `ScriptedModel` reads every request's whole transcript (to estimate tokens and, per agent,
    to find its place in the script), which grows with each round.
    """

    name = "constant"
    _call = ModelResponse(
        AssistantMessage(tool_calls=(ToolCall(id="t", name="tell"),)), Usage(requests=1)
    )
    _done = ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self.respond_untimed(request)

    def respond_inline(self, request: ModelRequest) -> ModelResponse:
        return self.respond_untimed(request)

    def respond_untimed(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        return self._done if isinstance(last, ToolResultMessage) else self._call


def ring(
    sim: Simulation,
    agents: int,
    rounds: int,
    *,
    constant: bool = False,
    model: Any = None,
    named: bool = False,
) -> None:
    """``agents`` agents in a ring; each runs ``rounds`` times, one a virtual second.

    ``named``: each prompt names its agent and the round (no two requests are the same).
    """
    ids = [f"a{i}" for i in range(agents)]
    neighbours = {agent_id: ids[(i + 1) % agents] for i, agent_id in enumerate(ids)}
    # One script for all (per_agent): each agent's place in it is read from its transcript.
    if model is None:
        model = (
            ConstantModel()
            if constant
            else ScriptedModel([ToolCall(id="t", name="tell"), "ok"] * rounds, per_agent=True)
        )
    spec = Agent("peer", model=model, tools=[TELL], on_message="queue")
    for agent_id in ids:
        sim.spawn(spec, agent_id=agent_id, tool_context=neighbours)

    def tick() -> None:
        for agent_id in ids:
            sim.ref(agent_id).run_async(f"go {agent_id} {sim.now:g}" if named else "go")

    for r in range(rounds):
        sim.at(float(r), tick)


def steps_per_second(agents: int, rounds: int, *, constant: bool = False) -> dict[str, Any]:
    sim = Simulation(seed=1, record_events=False)
    ring(sim, agents, rounds, constant=constant)
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    sim.run()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return {
        "agents": agents,
        "rounds": rounds,
        "steps": sim.steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": sim.steps / wall,
        # CPU time: what one core gives the simulation, whatever else shares the machine
        "steps_per_cpu_s": sim.steps / cpu,
        "messages": agents * rounds,
    }


def hundred_thousand(agents: int) -> dict[str, Any]:
    gc.collect()
    before = rss_bytes()
    sim = Simulation(seed=1, record_events=False)
    began = time.perf_counter()
    ring(sim, agents, 1)
    spawn_s = time.perf_counter() - began
    gc.collect()
    spawned = rss_bytes()
    began, cpu = time.perf_counter(), time.process_time()
    sim.run()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    after = rss_bytes()
    return {
        "agents": agents,
        "spawn_per_agent_s": spawn_s / agents,
        "rss_per_idle_agent_bytes": (spawned - before) / agents,
        "rss_per_agent_after_run_bytes": (after - before) / agents,
        "rss_total_bytes": after,
        "steps": sim.steps,
        "steps_per_s": sim.steps / wall,
        "steps_per_cpu_s": sim.steps / cpu,
    }


def sweep_world(sim: Simulation, agents: int = 2000) -> None:
    ring(sim, agents, 2)
    sim.collect("steps", lambda: sim.steps, every=1.0)


def sweep_overlap(agents: int, seeds: int) -> dict[str, Any]:
    def one_run() -> float:
        began = time.perf_counter()
        sweep(sweep_world, seeds=[0], params={"agents": [agents]}, processes=1)
        return time.perf_counter() - began

    first = one_run()
    began = time.perf_counter()
    table = sweep(sweep_world, seeds=range(seeds), params={"agents": [agents]})
    many = time.perf_counter() - began
    one = min(first, one_run())  # the machine is shared: the quieter of two measurements
    return {
        "agents": agents,
        "seeds": seeds,
        "processes": os.cpu_count(),
        "one_s": one,
        "sweep_s": many,
        "rows": len(table),
        "overlap": seeds * one / many,  # 1.0: no overlap; cores: perfect overlap
    }


def _timed_run(sim: Simulation) -> tuple[float, float]:
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    sim.run()
    return time.perf_counter() - began, time.process_time() - cpu


def replay(agents: int, rounds: int) -> dict[str, Any]:
    """A recorded ring replayed from its `CachedModel` file, beside the scripted ring."""

    def script() -> ScriptedModel:
        return ScriptedModel([ToolCall(id="t", name="tell"), "ok"] * rounds, per_agent=True)

    scripted = Simulation(seed=1)
    ring(scripted, agents, rounds, model=script(), named=True)
    scripted_wall, scripted_cpu = _timed_run(scripted)
    with tempfile.TemporaryDirectory(prefix="actors-bench-replay-") as folder:
        path = Path(folder) / "replies.db"
        recording = Simulation(seed=1)
        recorder = CachedModel(script(), path, mode="record")
        ring(recording, agents, rounds, model=recorder, named=True)
        record_wall, _ = _timed_run(recording)
        recorder.close()
        replaying = Simulation(seed=1)
        player = CachedModel(None, path, mode="replay", name="scripted")
        ring(replaying, agents, rounds, model=player, named=True)
        wall, cpu = _timed_run(replaying)
        rows = len(player)
        player.close()
    same = recording.events == replaying.events
    return {
        "agents": agents,
        "rounds": rounds,
        "steps": replaying.steps,
        "rows": rows,
        "hits": player.hits,
        "same_log": same,
        "record_s": record_wall,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": replaying.steps / wall,
        "steps_per_cpu_s": replaying.steps / cpu,
        "scripted_steps_per_s": scripted.steps / scripted_wall,
        "scripted_steps_per_cpu_s": scripted.steps / scripted_cpu,
    }


def main() -> int:
    args = parser(__doc__).parse_args()
    quick = args.quick
    # The big one first: its RSS is measured before anything was freed for it to reuse.
    big = hundred_thousand(2_000 if quick else 100_000)
    steps = steps_per_second(500 if quick else 10_000, 2 if quick else 5)
    loop_only = steps_per_second(500 if quick else 10_000, 2 if quick else 5, constant=True)
    overlap = sweep_overlap(200 if quick else 2_000, 2 if quick else 8)
    replayed = replay(200 if quick else 2_000, 2 if quick else 5)
    payload = {
        "steps": steps,
        "loop_only": loop_only,
        "hundred_thousand": big,
        "sweep": overlap,
        "replay": replayed,
    }

    return finish(payload, args.json, lambda: render(payload))


def render(payload: dict[str, Any]) -> str:
    """The section's markdown table (also used by ``python -m bench``)."""
    if "error" in payload:
        return f"### Simulation\n\nfailed: {payload['error']}"
    s, b, w = payload["steps"], payload["hundred_thousand"], payload["sweep"]
    c = payload["loop_only"]
    ok = "meets" if s["steps_per_cpu_s"] >= STEPS_TARGET else "misses"
    return "\n".join(
        [
            "### Simulation",
            "",
            "| measure | figure |",
            "| --- | --- |",
            f"| agent-steps/s, {s['agents']:,} agents exchanging peer messages | "
            f"{s['steps_per_s']:,.0f} wall, {s['steps_per_cpu_s']:,.0f} per CPU-second "
            f"({ok} the {STEPS_TARGET:,}/s target) |",
            f"| the same with a constant-time model (the loop and host alone) | "
            f"{c['steps_per_s']:,.0f} wall, {c['steps_per_cpu_s']:,.0f} per CPU-second |",
            f"| {b['agents']:,} agents: RSS per idle agent | "
            f"{b['rss_per_idle_agent_bytes'] / 1024:.1f} KiB |",
            f"| {b['agents']:,} agents: RSS per agent after a run each | "
            f"{b['rss_per_agent_after_run_bytes'] / 1024:.1f} KiB |",
            f"| {b['agents']:,} agents: spawn per agent | {b['spawn_per_agent_s'] * 1e6:.1f} µs |",
            f"| {b['agents']:,} agents: agent-steps/s | {b['steps_per_s']:,.0f} wall, "
            f"{b['steps_per_cpu_s']:,.0f} per CPU-second |",
            f"| sweep of {w['seeds']} seeds ({w['agents']:,} agents each) vs one | "
            f"{w['sweep_s']:.2f} s vs {w['one_s']:.2f} s: overlap {w['overlap']:.2f}x "
            f"on {w['processes']} cores |",
            *_replay_rows(payload.get("replay")),
        ]
    )


def _replay_rows(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return []
    ok = "meets" if r["steps_per_cpu_s"] >= REPLAY_TARGET else "misses"
    same = "the same event log" if r["same_log"] else "A DIFFERENT EVENT LOG"
    return [
        f"| replay of a recorded run from `CachedModel` ({r['agents']:,} agents, "
        f"{r['rows']:,} recorded replies): agent-steps/s | {r['steps_per_s']:,.0f} wall, "
        f"{r['steps_per_cpu_s']:,.0f} per CPU-second ({ok} the {REPLAY_TARGET:,}/s target; "
        f"the scripted model: {r['scripted_steps_per_cpu_s']:,.0f}); {same} |",
    ]


if __name__ == "__main__":
    sys.exit(main())
