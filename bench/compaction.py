"""Compaction: the framework's own cost of a compaction, in a 10,000-message session.

    .venv/bin/python -m bench.compaction [--quick] [--json PATH]

Session: one agent with `Compaction` and a window of 4,000 tokens runs 5,000 turns (10,000
messages in its log), driven on the agent loop itself (no host: no thread hop is counted).
Each time a request would pass the window's 80 %, the loop counts it, plans the range and
builds the summary request; when the summary comes back it logs the ``compacted`` event,
folds it and builds the next request. All of that is timed; the summarizer's own request is
not (it answers at once). Reported: the median and the worst compaction once the log holds
9,000 messages or more.

All in view: the first compaction of a transcript whose 10,000 messages are all in view (an
old session that turns compaction on): the same work over 7,000 messages at once. Its cost
grows with the range summarised (sizing, rendering it for the summarizer, and freeing the
shadowed messages' objects), not with the log.

Target (issue 26): the framework's overhead of a compaction <= 1 ms in a 10,000-message
session.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, fmt_time, parser

FULL_MESSAGES = 10_000
QUICK_MESSAGES = 500
TRIALS = 5
TARGET_S = 1e-3
WINDOW = 4_000


class _Model:
    name = "bench"

    async def request(self, request: Any) -> Any:
        raise AssertionError("the benchmark drives the loop itself")


def _events(messages: int) -> list[Any]:
    from actors import AgentContext, AssistantMessage, SystemMessage, UserMessage

    ctx = AgentContext("bench")
    ctx.add_message(SystemMessage(content="You are a long-lived assistant."))
    for n in range(messages // 2):
        ctx.add_message(UserMessage(content=f"message {n}: please note item {n * 7 % 101}"))
        ctx.add_message(AssistantMessage(content=f"Noted item {n * 7 % 101}, as asked."))
    return list(ctx.events)


def trial(events: list[Any], messages: int, warm: bool) -> tuple[float, float, int]:
    """One compaction of everything in view; (s before the summary, s after it, summarised)."""
    from actors import Agent, AgentContext, AssistantMessage, Compaction, ModelResponse, Usage
    from actors.loop._loop import AgentLoop
    from actors.loop._types import CallModel, ModelReplied, StartRun

    window = messages * 10  # about half the transcript's tokens: it must compact
    agent = Agent(
        "bench",
        model=_Model(),
        context_window=window,
        compaction=Compaction(at=0.8, keep_last_turns=4),
    )
    ctx = AgentContext.from_events(events, agent_id="bench")
    loop = AgentLoop(agent, ctx, model=agent.model)  # type: ignore[arg-type]
    compactor = loop._compactor
    assert compactor is not None
    if warm:
        compactor._transcript_tokens(ctx)  # counted at its earlier requests
    began = time.perf_counter()
    effects = loop.handle(StartRun("one more thing", "run-1"))
    planned = time.perf_counter() - began
    (summary_call,) = effects
    assert isinstance(summary_call, CallModel)
    assert summary_call.step < 0
    plan = loop._run.compacting  # type: ignore[union-attr]
    summarised = plan.last - plan.first + 1 - len(plan.kept)
    reply = ModelResponse(AssistantMessage(content="The user asked to note many items."), Usage())
    began = time.perf_counter()
    effects = loop.handle(ModelReplied("run-1", summary_call.step, response=reply))
    applied = time.perf_counter() - began
    assert isinstance(effects[0], CallModel)
    return planned, applied, summarised


def session(turns: int, window: int) -> dict[str, Any]:
    """An agent compacting as it goes; the overhead of each compaction late in its session."""
    from actors import (
        Agent,
        AgentContext,
        AssistantMessage,
        Compaction,
        ModelResponse,
        SystemMessage,
        Usage,
    )
    from actors.loop._loop import AgentLoop
    from actors.loop._types import CallModel, Finish, ModelReplied, StartRun

    agent = Agent(
        "bench",
        model=_Model(),
        context_window=window,
        compaction=Compaction(at=0.8, keep_last_turns=4),
    )
    ctx = AgentContext("bench")
    ctx.add_message(SystemMessage(content="You are a long-lived assistant."))
    loop = AgentLoop(agent, ctx, model=agent.model)  # type: ignore[arg-type]
    summary = ModelResponse(AssistantMessage(content="Noted items, as asked."), Usage())
    late: list[float] = []
    compactions = 0
    for n in range(turns):
        run_id = f"run-{n}"
        began = time.perf_counter()
        effects = loop.handle(StartRun(f"message {n}: please note item {n * 7 % 101}", run_id))
        spent = time.perf_counter() - began
        (call,) = effects
        assert isinstance(call, CallModel)
        if call.step < 0:  # a compaction: its summary comes back at once
            began = time.perf_counter()
            effects = loop.handle(ModelReplied(run_id, call.step, response=summary))
            spent += time.perf_counter() - began
            (call,) = effects
            assert isinstance(call, CallModel)
            assert call.step > 0
            compactions += 1
            if 2 * n >= turns * 9 // 5:  # the log holds 9,000 messages or more (of 10,000)
                late.append(spent)
        answer = AssistantMessage(content=f"Noted item {n * 7 % 101}, as asked.")
        reply = ModelResponse(answer, Usage(requests=1))
        (done,) = loop.handle(ModelReplied(run_id, call.step, response=reply))
        assert isinstance(done, Finish), done
        assert done.error is None, done
    logged = sum(1 for e in ctx.events if e.type in ("user_message", "assistant_message"))
    return {
        "turns": turns,
        "logged_messages": logged,
        "in_view": ctx.message_count,
        "window": window,
        "compactions": compactions,
        "late_compactions": len(late),
        "median_s": statistics.median(late) if late else float("nan"),
        "max_s": max(late) if late else float("nan"),
    }


def measure(quick: bool) -> dict[str, Any]:
    messages = QUICK_MESSAGES if quick else FULL_MESSAGES
    out: dict[str, Any] = {"quick": quick, "messages": messages, "target_s": TARGET_S}
    out["session"] = session(messages // 2, WINDOW)
    events = _events(messages)
    runs = [trial(events, messages, True) for _ in range(3 if quick else TRIALS)]
    out["all_in_view"] = {
        "plan_s": statistics.median(r[0] for r in runs),
        "apply_s": statistics.median(r[1] for r in runs),
        "total_s": statistics.median(r[0] + r[1] for r in runs),
        "summarised": runs[0][2],
    }
    return out


def report(r: dict[str, Any]) -> str:
    s, a = r["session"], r["all_in_view"]
    return "\n".join(
        [
            f"one agent, {s['logged_messages']:,} messages logged ({s['in_view']} in view, "
            f"window {s['window']:,} tokens): {s['compactions']} compactions; late ones "
            f"cost {fmt_time(s['median_s'])} (median), {fmt_time(s['max_s'])} (worst), "
            "the summarizer's request aside",
            f"all {r['messages']:,} messages in view: one compaction of {a['summarised']:,} "
            f"costs {fmt_time(a['total_s'])} (plan and summary request "
            f"{fmt_time(a['plan_s'])}; event, fold and next request {fmt_time(a['apply_s'])})",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
