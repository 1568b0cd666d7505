"""Retention: what a long-lived runtime holds after many agents came and went, and a long session.

    .venv/bin/python -m bench.retention [--quick] [--json PATH]

Cycles: one `Runtime` spawns an agent (each with its own `tool_context` and its own model with a
client to close), runs it once and stops it, 100,000 times; the process's resident memory is
read after 1,000 cycles (the baseline: everything is warm) and then every so often. A runtime
that held what ended (records, `tool_context`s, clients) would grow with every cycle.

Session: one agent runs 2,000 times in a row. Its own log grows by design (each run appends ~15
events to the context it owns); what must not grow is anything else per run, such as a test
model keeping every request with its whole transcript (which is quadratic). Reported: resident
memory per run over the first and the last thousand runs.

Target (issue 12): memory after 100,000 cycles within a few MiB of the baseline; the session's
memory per run the same late as early.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, parser, rss_bytes

FULL_CYCLES = 100_000
QUICK_CYCLES = 2_000
FULL_RUNS = 2_000
QUICK_RUNS = 200


class _Client:
    """A model with a client to close (like a provider's), answering at once."""

    name = "client"

    def __init__(self) -> None:
        self.closed = False

    async def request(self, request: Any) -> Any:
        from actors import AssistantMessage, ModelResponse, Usage

        return ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    async def aclose(self) -> None:
        self.closed = True


def cycles(count: int) -> dict[str, Any]:
    from actors import Agent, Runtime

    marks: list[tuple[int, int]] = []
    base_at = min(1_000, count // 2)
    step = max(1, count // 10)
    with Runtime() as rt:
        for i in range(1, count + 1):
            agent = Agent("cycle", model=_Client())
            ref = rt.spawn(agent, tool_context={"connection": object(), "n": i})
            ref.run("hi")
            ref.stop()
            if i == base_at or i % step == 0:
                gc.collect()
                marks.append((i, rss_bytes()))
        held = rt.live_agents()
    base = next(rss for i, rss in marks if i == base_at)
    return {
        "cycles": count,
        "baseline_at": base_at,
        "marks": marks,
        "grown_bytes": marks[-1][1] - base,
        "live_at_end": held,
    }


def session(runs: int) -> dict[str, Any]:
    from actors import Agent, Runtime
    from actors.testing import ScriptedModel

    agent = Agent("long", model=ScriptedModel(["ok"] * runs, per_agent=True))
    marks: list[tuple[int, int]] = []
    with Runtime() as rt:
        ref = rt.spawn(agent)
        for i in range(1, runs + 1):
            ref.run("again")
            if i % max(1, runs // 10) == 0:
                gc.collect()
                marks.append((i, rss_bytes()))
    half = len(marks) // 2
    early = (marks[half - 1][1] - marks[0][1]) / max(1, marks[half - 1][0] - marks[0][0])
    late = (marks[-1][1] - marks[half][1]) / max(1, marks[-1][0] - marks[half][0])
    return {"runs": runs, "marks": marks, "early_bytes_per_run": early, "late_bytes_per_run": late}


def measure(quick: bool) -> dict[str, Any]:
    return {
        "quick": quick,
        "cycles": cycles(QUICK_CYCLES if quick else FULL_CYCLES),
        "session": session(QUICK_RUNS if quick else FULL_RUNS),
    }


def report(r: dict[str, Any]) -> str:
    c, s = r["cycles"], r["session"]
    return "\n".join(
        [
            f"{c['cycles']:,} spawn/run/stop cycles: resident memory grew "
            f"{c['grown_bytes'] / 1024**2:+.1f} MiB after cycle {c['baseline_at']:,} "
            f"({c['live_at_end']} agents left in memory)",
            f"one agent, {s['runs']:,} runs: {s['early_bytes_per_run'] / 1024:.1f} KiB per run "
            f"early, {s['late_bytes_per_run'] / 1024:.1f} KiB per run late (its own log)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
