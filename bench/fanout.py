"""Fan-out: one parent hands a task to 1,000 subagents at once, each model waiting 200 ms.

    .venv/bin/python bench/fanout.py [--quick] [--json PATH]

The parent's scripted model calls its ``worker`` subagent 1,000 times in one reply; each child
is its own actor whose `ScriptedModel` waits 200 ms (a cancellable wait on the effects' event
loop, no thread blocked) and answers. Printed: the wall time of the parent's run, the overlap
(1,000 x 0.2 s / wall: how many model waits were in flight on average), and the spawn time per
child (time inside `LocalHost.spawn_child`, in the parent's turn). Target (issue 13): <= 1.2 s.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Agent, Runtime, Subagent, ToolCall, TreeLimits
from actors.testing import ScriptedModel
from bench._common import finish, fmt_time, median, parser, rss_bytes

WALL_TARGET = 1.2


def fan_out(children: int, latency: float) -> dict[str, Any]:
    worker = Agent("worker", model=ScriptedModel(["ok"], latency=latency, per_agent=True))
    calls = [
        ToolCall(id=f"w{i}", name="worker", arguments={"task": f"item {i}"})
        for i in range(children)
    ]
    parent = Agent(
        "parent",
        model=ScriptedModel([calls, "all done"]),
        subagents=[Subagent(worker, timeout=120.0)],
    )
    limits = TreeLimits(max_depth=5, max_children=children + 1000, max_agents=children + 4000)
    gc.collect()
    rss_before = rss_bytes()
    threads_peak = threading.active_count()
    with Runtime(limits=limits) as runtime:
        spawn_times: list[float] = []
        last_spawn = [0.0]
        original = runtime._host.spawn_child

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            node = original(*args, **kwargs)
            ended = time.perf_counter()
            spawn_times.append(ended - began)
            last_spawn[0] = ended
            return node

        runtime._host.spawn_child = timed  # type: ignore[method-assign]
        ref = runtime.spawn(parent)
        began = time.perf_counter()
        future = ref.run_async("fan out")
        while not future.done():  # sample the peak while children live
            threads_peak = max(threads_peak, threading.active_count())
            time.sleep(0.02)
        result = future.result()
        wall = time.perf_counter() - began
        rss_peak = rss_bytes()
        assert result.output == "all done", result.output
        failed = [m for m in result.messages if getattr(m, "is_error", False)]
        assert not failed, failed[:3]
    return {
        "children": children,
        "latency_s": latency,
        "wall_s": wall,
        "overlap": children * latency / wall,
        "spawn_per_child_s": median(spawn_times),
        "spawn_total_s": sum(spawn_times),
        "spawn_phase_s": last_spawn[0] - began,
        "threads_peak": threads_peak,
        "rss_growth_bytes": max(0, rss_peak - rss_before),
    }


def measure(quick: bool) -> dict[str, Any]:
    children, latency = (20, 0.05) if quick else (1_000, 0.2)
    result = fan_out(children, latency)
    result |= {"quick": quick, "target_wall_s": WALL_TARGET}
    return result


def report(r: dict[str, Any]) -> str:
    ok = "met" if r["wall_s"] <= WALL_TARGET else "MISSED"
    return "\n".join(
        [
            f"{r['children']} children x {fmt_time(r['latency_s'])} model latency",
            f"wall                 {fmt_time(r['wall_s'])}  (target <= {WALL_TARGET} s: {ok})",
            f"overlap              {r['overlap']:.0f}x  (children x latency / wall)",
            f"spawn per child      {fmt_time(r['spawn_per_child_s'])} median, "
            f"{fmt_time(r['spawn_total_s'])} in all; last child spawned at "
            f"{fmt_time(r['spawn_phase_s'])}",
            f"threads at peak      {r['threads_peak']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
