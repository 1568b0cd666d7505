"""Per-run overhead of an actors agent, against the floor of a raw pykka ask.

    .venv/bin/python bench/run_overhead.py [--quick] [--json PATH]

Measures, in one process:

- raw ask: a `pykka.ThreadingActor` whose ``on_receive`` returns the message; ``ref.ask(x)``.
- hop: an ask round trip through an agent actor (`AgentActor.on_receive` answering a status
  `Query`): what one message between agents costs on top of pykka. Also ``ref.context()``,
  the public query, which serializes and copies the agent's context on top of the hop. The
  three are measured in alternating blocks, so drift skews none against another.
- one run (a `ScriptedModel` makes one tool call, then answers), sequential:
  a fresh agent per run (spawn and stop timed apart from the run: the headline), and one agent
  reused with ``ref.run`` for 200 runs (its transcript grows by 4 messages a run, and so does
  the cost of a run: the first and second halves are reported apart);
- the same run with no actor at all: the agent loop driven inline on one thread (what the
  run costs before any thread hop);
- 100 runs at once: 100 agents spawned first, then ``run_async`` on all and wait for all;
  the figure is wall time / 100.
- one run with a budget (a fresh agent per run, spawned with a dollar `Budget`: each of its
  two requests is reserved, priced and settled), against the same run without, in alternating
  blocks.

Target (issue 3): one run <= 0.8 ms sequential. Target (issue 9): hop <= 1.5x raw ask.
Target (issue 26): a budget adds <= 10 % to the per-run figure.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from decimal import Decimal

import pykka

from actors import Agent, Budget, Price, Runtime, ToolCall
from actors.host._messages import Query
from actors.testing import ScriptedModel
from bench._common import finish, fmt_time, median, parser

RUN_TARGET = 0.8e-3
HOP_TARGET = 1.5
BUDGET_TARGET = 1.10
BUDGET = Budget(
    usd=Decimal(1_000_000),
    requests=10**12,
    prices={"scripted": Price(input=Decimal("0.15"), output=Decimal("0.60"))},
)


def echo(text: str) -> str:
    """Give the text back.

    Args:
        text: Anything.
    """
    return text


class Echo(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return message


def spec(replies: int = 1) -> Agent[Any]:
    """An agent whose scripted model calls `echo` once, then answers, ``replies`` times over."""
    script: list[Any] = []
    for i in range(replies):
        script += [ToolCall(id=f"c{i}", name="echo", arguments={"text": "hi"}), "done"]
    return Agent("bench", model=ScriptedModel(script, per_agent=True), tools=[echo])


def floor(n: int, block: int = 500) -> dict[str, float]:
    """Medians of a raw pykka ask, a status query to an agent actor, and ``ref.context()``.

    The three are measured in alternating blocks, so that a machine whose speed drifts during
    the measurement (a shared 2-core box does) skews none of them against the others.
    """
    clock = time.perf_counter
    samples: dict[str, list[float]] = {"ask": [], "hop": [], "context": []}
    echo_ref = Echo.start()
    try:
        with Runtime() as runtime:
            ref = runtime.spawn(spec())
            actor = runtime._host.nodes[ref.agent_id].ref
            assert actor is not None
            query = Query("status")
            for _ in range(min(n, 1000)):  # warm up
                echo_ref.ask(1)
                actor.ask(query, timeout=10)
            done = 0
            while done < n:
                size = min(block, n - done)
                for i in range(size):
                    began = clock()
                    echo_ref.ask(i)
                    samples["ask"].append(clock() - began)
                for _ in range(size):
                    began = clock()
                    actor.ask(query, timeout=10)
                    samples["hop"].append(clock() - began)
                for _ in range(max(1, size // 10)):
                    began = clock()
                    ref.context()
                    samples["context"].append(clock() - began)
                done += size
    finally:
        echo_ref.stop()
    return {kind: median(values) for kind, values in samples.items()}


def state_machine(n: int) -> dict[str, float]:
    """The same run with no actor, no thread, no event loop: the agent loop's own cost.

    `SyncDriver` drives the `AgentLoop` inline; its model calls are stepped by hand here (the
    scripted model never awaits), instead of one `asyncio.run` per call.
    """
    from actors.loop._types import CallModel, ModelReplied
    from actors.testing import SyncDriver

    class Inline(SyncDriver):
        def _call_model(self, effect: CallModel) -> ModelReplied:
            coro = self.loop.model.request(effect.request)
            try:
                coro.send(None)
            except StopIteration as done:
                return ModelReplied(effect.run_id, effect.step, response=done.value)
            coro.close()
            return super()._call_model(effect)

    agent = spec()
    clock = time.perf_counter
    makes, runs = [], []
    for i in range(n + min(50, n)):
        t0 = clock()
        driver = Inline(agent, agent_id=f"s{i}")
        t1 = clock()
        result = driver.run("go")
        t2 = clock()
        if i >= min(50, n):  # the first ones warm up
            makes.append(t1 - t0)
            runs.append(t2 - t1)
    assert result.output == "done", result.output
    return {"run": median(runs), "make": median(makes)}


def sequential_fresh(n: int) -> dict[str, float]:
    """A fresh agent per run: medians of spawn, run and stop, apart."""
    agent = spec()
    clock = time.perf_counter
    spawns, runs, stops = [], [], []
    with Runtime() as runtime:
        for i in range(min(50, n)):  # warm up (imports, first-call caches)
            runtime.spawn(agent, agent_id=f"warm-{i}").run("go")
        for i in range(n):
            t0 = clock()
            ref = runtime.spawn(agent, agent_id=f"a{i}")
            t1 = clock()
            result = ref.run("go", timeout=30)
            t2 = clock()
            ref.stop()
            t3 = clock()
            spawns.append(t1 - t0)
            runs.append(t2 - t1)
            stops.append(t3 - t2)
        assert result.output == "done", result.output
    return {"spawn": median(spawns), "run": median(runs), "stop": median(stops)}


def sequential_reused(n: int) -> dict[str, float]:
    """One agent, ``n`` runs in a row: its transcript grows by 4 messages a run."""
    clock = time.perf_counter
    with Runtime() as runtime:
        ref = runtime.spawn(spec(n + 20))
        for _ in range(20):
            ref.run("go")
        runs = []
        for _ in range(n):
            began = clock()
            ref.run("go", timeout=30)
            runs.append(clock() - began)
    half = len(runs) // 2
    return {
        "run": median(runs),
        "first_half": median(runs[:half]) if half else median(runs),
        "second_half": median(runs[half:]),
    }


def concurrent(width: int, rounds: int) -> dict[str, float]:
    """``width`` agents run at once; per-run = wall / width, median over ``rounds``."""
    agent = spec()
    clock = time.perf_counter
    per_run, spawn = [], []
    with Runtime() as runtime:
        for r in range(rounds + 1):
            t0 = clock()
            refs = [runtime.spawn(agent, agent_id=f"r{r}-{i}") for i in range(width)]
            t1 = clock()
            futures = [ref.run_async("go") for ref in refs]
            for future in futures:
                assert future.result(timeout=60).output == "done"
            t2 = clock()
            for ref in refs:
                ref.stop()
            if r:  # the first round warms up
                spawn.append((t1 - t0) / width)
                per_run.append((t2 - t1) / width)
    return {"run": median(per_run), "spawn": median(spawn)}


def budgeted(n: int, block: int = 50) -> dict[str, float]:
    """A fresh agent per run, with and without a budget, in alternating blocks: medians."""
    agent = spec()
    clock = time.perf_counter
    samples: dict[bool, list[float]] = {False: [], True: []}
    with Runtime() as runtime:
        for i in range(min(50, n)):  # warm up both paths
            runtime.spawn(agent, agent_id=f"warm-{i}", budget=BUDGET if i % 2 else None).run("go")
        done = 0
        while done < n:
            for with_budget in (False, True):
                for i in range(min(block, n - done)):
                    ref = runtime.spawn(
                        agent,
                        agent_id=f"b{with_budget:d}-{done + i}",
                        budget=BUDGET if with_budget else None,
                    )
                    began = clock()
                    result = ref.run("go", timeout=30)
                    samples[with_budget].append(clock() - began)
                    ref.stop()
            done += block
        assert result.output == "done", result.output
    plain, with_budget = median(samples[False]), median(samples[True])
    return {"plain": plain, "budgeted": with_budget, "ratio": with_budget / plain}


def measure(quick: bool, fraction: float = 1.0) -> dict[str, Any]:
    asks = 300 if quick else max(1_000, int(20_000 * fraction))
    runs = 30 if quick else max(100, int(2_000 * fraction))
    width, rounds = (20, 2) if quick else (100, max(2, round(10 * fraction)))
    gc.collect()
    hops = floor(asks)
    ask = hops["ask"]
    fresh = sequential_fresh(runs)
    try:
        inline = state_machine(runs)
    except Exception as exc:  # internals moved: report it, keep the rest of the figures
        inline = {"run": float("nan"), "make": float("nan"), "error": repr(exc)}
    reused = sequential_reused(min(runs, 200))
    wide = concurrent(width, rounds)
    budget = budgeted(runs)
    return {
        "quick": quick,
        "fraction": fraction,
        "sizes": {
            "asks": asks,
            "runs": runs,
            "reused_runs": min(runs, 200),
            "width": width,
            "rounds": rounds,
        },
        "raw_ask_s": ask,
        "hop_s": hops["hop"],
        "context_query_s": hops["context"],
        "hop_over_ask": hops["hop"] / ask,
        "run_fresh_s": fresh["run"],
        "run_state_machine_s": inline["run"],
        "state_machine_error": inline.get("error"),
        "spawn_s": fresh["spawn"],
        "stop_s": fresh["stop"],
        "run_reused_s": reused["run"],
        "run_reused_first_half_s": reused["first_half"],
        "run_reused_second_half_s": reused["second_half"],
        "run_concurrent_s": wide["run"],
        "spawn_concurrent_s": wide["spawn"],
        "concurrency": width,
        "run_plain_s": budget["plain"],
        "run_budgeted_s": budget["budgeted"],
        "budget_over_plain": budget["ratio"],
        "targets": {
            "run_s": RUN_TARGET,
            "hop_over_ask": HOP_TARGET,
            "budget_over_plain": BUDGET_TARGET,
        },
    }


def report(r: dict[str, Any]) -> str:
    ok = "met" if r["run_fresh_s"] <= RUN_TARGET else "MISSED"
    hop_ok = "met" if r["hop_over_ask"] <= HOP_TARGET else "MISSED"
    budget_ok = "met" if r["budget_over_plain"] <= BUDGET_TARGET else "MISSED"
    return "\n".join(
        [
            f"raw pykka ask            {fmt_time(r['raw_ask_s'])}",
            f"hop (status query)       {fmt_time(r['hop_s'])}  "
            f"= {r['hop_over_ask']:.2f}x raw ask (target <= {HOP_TARGET}x: {hop_ok})",
            f"ref.context()            {fmt_time(r['context_query_s'])}",
            f"run, fresh agent         {fmt_time(r['run_fresh_s'])}  "
            f"(target <= {fmt_time(RUN_TARGET)}: {ok})",
            f"  spawn / stop           {fmt_time(r['spawn_s'])} / {fmt_time(r['stop_s'])}",
            f"  of which agent loop    {fmt_time(r['run_state_machine_s'])}  "
            "(the same run driven inline: no actor, thread or event loop)",
            f"run, reused agent        {fmt_time(r['run_reused_s'])}  "
            f"(first half {fmt_time(r['run_reused_first_half_s'])}, "
            f"second half {fmt_time(r['run_reused_second_half_s'])})",
            f"run, {r['concurrency']} at once          {fmt_time(r['run_concurrent_s'])} per run "
            f"(spawn {fmt_time(r['spawn_concurrent_s'])} per agent)",
            f"run with a budget        {fmt_time(r['run_budgeted_s'])} "
            f"vs {fmt_time(r['run_plain_s'])} without = {r['budget_over_plain']:.2f}x "
            f"(target <= {BUDGET_TARGET:.2f}x: {budget_ok})",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="scale the sizes (for rounds interleaved with the peers')",
    )
    args = p.parse_args(argv)
    result = measure(args.quick, args.fraction)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
