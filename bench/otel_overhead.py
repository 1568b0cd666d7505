"""What OpenTelemetry tracing adds to a run: the same runs with tracing off and on.

    .venv/bin/python bench/otel_overhead.py [--quick] [--json PATH]

The run of `bench/run_overhead.py` (a fresh agent whose scripted model calls one tool, then
answers: 4 spans), and the research team of the tests (a lead, two researchers in parallel,
each delegating to a checker: 7 agents, 17 spans), timed with tracing

- off: `actors.otel` never instrumented (the observer seam's ``None`` check only);
- on: `actors.otel.instrument` into the SDK's `BatchSpanProcessor` with an exporter that
  drops the spans (what a process exporting over OTLP pays in its own threads);
- on with content: the same, with ``capture_content=True``.

The three are measured in alternating blocks, so a machine whose speed drifts skews none.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from actors import Agent, RunContext, Runtime, Subagent, tool
from actors.otel import instrument, uninstrument
from actors.testing import ScriptedModel, call
from bench._common import finish, fmt_time, median, parser
from bench.run_overhead import spec


class Drop(SpanExporter):
    """An exporter that counts spans and keeps none."""

    def __init__(self) -> None:
        self.count = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.count += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


checker = Agent("checker", model=ScriptedModel(["Checked."], per_agent=True))


@tool
def check(ctx: RunContext, claim: str) -> str:
    """Have a checker look at a claim.

    Args:
        claim: The claim.
    """
    return str(ctx.delegate(checker, f"Check: {claim}", timeout=30))


def team() -> Agent[Any]:
    researcher = Agent(
        "researcher",
        model=ScriptedModel([call("check", claim="x"), "Found."], per_agent=True),
        tools=[check],
    )
    return Agent(
        "lead",
        model=ScriptedModel(
            [[call("researcher", task="A"), call("researcher", task="B")], "Done."],
            per_agent=True,
        ),
        subagents=[Subagent(researcher, timeout=30)],
    )


def one_run(runtime: Runtime, i: int) -> float:
    ref = runtime.spawn(spec(), agent_id=f"a{i}")
    began = time.perf_counter()
    ref.run("go", timeout=30)
    took = time.perf_counter() - began
    ref.stop()
    return took


def team_run(runtime: Runtime, i: int) -> float:
    ref = runtime.spawn(team(), agent_id=f"t{i}")
    began = time.perf_counter()
    assert ref.run("go", timeout=30).output == "Done."
    took = time.perf_counter() - began
    ref.stop()
    return took


MODES = ("off", "on", "content")


def measure_kind(run: Callable[[Runtime, int], float], n: int, block: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    exporter = Drop()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with Runtime() as runtime:
        for i in range(min(50, n)):  # warm up, tracing on and off
            if i % 2:
                instrument(provider)
            run(runtime, -1 - i)
            uninstrument()
        done = 0
        while done < n:
            for mode in MODES:
                if mode == "on":
                    instrument(provider)
                elif mode == "content":
                    instrument(provider, capture_content=True)
                for i in range(block):
                    samples[mode].append(run(runtime, done + i + n * MODES.index(mode)))
                uninstrument()
            done += block
    provider.shutdown()
    off = median(samples["off"])
    return {
        "off_s": off,
        "on_s": median(samples["on"]),
        "content_s": median(samples["content"]),
        "added_s": median(samples["on"]) - off,
        "added_content_s": median(samples["content"]) - off,
        "spans": exporter.count,
    }


def measure(quick: bool) -> dict[str, Any]:
    n, block = (60, 20) if quick else (1_500, 100)
    gc.collect()
    single = measure_kind(one_run, n, block)
    gc.collect()
    tree = measure_kind(team_run, max(30, n // 5), max(10, block // 5))
    return {"quick": quick, "runs": n, "single": single, "team": tree}


def report(r: dict[str, Any]) -> str:
    lines = []
    for kind, spans in (("single", 4), ("team", 17)):
        row = r[kind]
        lines += [
            f"{kind} run ({spans} spans)",
            f"  tracing off            {fmt_time(row['off_s'])}",
            f"  tracing on             {fmt_time(row['on_s'])}  "
            f"(+{fmt_time(row['added_s'])}, {fmt_time(row['added_s'] / spans)} a span)",
            f"  on, with content       {fmt_time(row['content_s'])}  "
            f"(+{fmt_time(row['added_content_s'])})",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    results = measure(args.quick)
    return finish(results, args.json, lambda: report(results))


if __name__ == "__main__":
    sys.exit(main())
