"""Does a run cost more as an agent's transcript grows? One agent, 2,000 runs in a row.

    .venv/bin/python bench/growth.py [--quick] [--json PATH]

The agent of bench/run_overhead.py (a scripted model makes one tool call, then answers), reused:
each run adds 4 messages and 15 events to its transcript and log. One agent is brought to each
mark (run 10, 200, 2,000) untimed; then the agents take turns, one timed run each, 41 rounds,
and the figure at run N is the median of its agent's timed runs (turns keep a machine's drift
out of the ratio). Measured twice: through a `Runtime` (actor, threads, event loop: what a
user gets) and with the agent loop driven inline by `SyncDriver` (the framework's own work,
no thread hops). The scripted model answers inline and does no I/O, so
nearly all of a run is framework cost; a provider's encoding of the transcript, which must grow
with it, is not part of it.

Target (issue 14, item 10): the cost at run 2,000 is the cost at run 10 (ratio ~1).
"""

from __future__ import annotations

import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors import Agent, Runtime, ToolCall
from actors.testing import ScriptedModel, SyncDriver
from bench._common import finish, fmt_time, parser

MARKS = (10, 200, 2_000)
QUICK_MARKS = (10, 50, 200)
ROUNDS = 41  # timed runs per mark (quick: 15)
RATIO_TARGET = 1.5  # run 2,000 over run 10: flat, with room for noise


def echo(text: str) -> str:
    """Give the text back.

    Args:
        text: Anything.
    """
    return text


def spec(runs: int) -> Agent[Any]:
    script: list[Any] = []
    for i in range(runs):
        script += [ToolCall(id=f"c{i}", name="echo", arguments={"text": "hi"}), "done"]
    return Agent("growth", model=ScriptedModel(script, per_agent=True), tools=[echo])


def interleaved(runners: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Time one run of each runner in turn, ``rounds`` times; the median of each.

    Taking turns keeps a machine whose speed drifts (a shared one does) out of the ratios.
    """
    clock = time.perf_counter
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            began = clock()
            run()
            samples[name].append(clock() - began)
    return {name: statistics.median(values) for name, values in samples.items()}


def through_runtime(marks: tuple[int, ...], rounds: int) -> dict[str, float]:
    with Runtime() as runtime:
        warm = runtime.spawn(spec(50), agent_id="warm-up")
        for _ in range(50):  # imports, first-call caches, the pool's threads
            warm.run("go")
        runners: dict[str, Callable[[], Any]] = {}
        for mark in marks:
            ref = runtime.spawn(spec(mark + rounds), agent_id=f"at-{mark}")
            for _ in range(mark - 1):  # the timed runs are run `mark` and the next ones
                ref.run("go", timeout=30)
            runners[str(mark)] = functools.partial(ref.run, "go", timeout=30)
        gc.collect()
        return interleaved(runners, rounds)


def inline(marks: tuple[int, ...], rounds: int) -> dict[str, float]:
    warm = SyncDriver(spec(50), agent_id="warm-up")
    for _ in range(50):
        warm.run("go")
    runners: dict[str, Callable[[], Any]] = {}
    for mark in marks:
        driver = SyncDriver(spec(mark + rounds), agent_id=f"at-{mark}")
        for _ in range(mark - 1):
            driver.run("go")
        runners[str(mark)] = functools.partial(driver.run, "go")
    gc.collect()
    return interleaved(runners, rounds)


def measure(quick: bool) -> dict[str, Any]:
    marks = QUICK_MARKS if quick else MARKS
    rounds = 15 if quick else ROUNDS
    runtime = through_runtime(marks, rounds)
    loop = inline(marks, rounds)
    first, last = str(marks[0]), str(marks[-1])
    return {
        "quick": quick,
        "marks": list(marks),
        "rounds": rounds,
        "runtime_s": runtime,
        "inline_s": loop,
        "runtime_ratio": runtime[last] / runtime[first],
        "inline_ratio": loop[last] / loop[first],
        "target_ratio": RATIO_TARGET,
    }


def report(r: dict[str, Any]) -> str:
    marks = [str(m) for m in r["marks"]]
    lines = ["per-run cost of one reused agent, at run " + ", ".join(marks)]
    for label, key, ratio in (
        ("runtime", "runtime_s", "runtime_ratio"),
        ("inline ", "inline_s", "inline_ratio"),
    ):
        figures = "  ".join(f"{fmt_time(r[key][m]):>9}" for m in marks)
        verdict = "met" if r[ratio] <= RATIO_TARGET else "MISSED"
        lines.append(
            f"  {label} {figures}   run {marks[-1]} / run {marks[0]} = {r[ratio]:.2f}x "
            f"(target <= {RATIO_TARGET}x: {verdict})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
