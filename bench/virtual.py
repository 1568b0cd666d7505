"""Virtual agents: a million sessions over SQLite, 1% in memory at a time; activation latency.

    .venv/bin/python -m bench.virtual [--quick] [--json PATH]
    .venv/bin/python -m bench.virtual --sessions 100000     # another size

Sessions: each of N sessions is opened with `Runtime.open_session` (a new agent in a SQLite
file), runs once with a scripted model, and is passivated as soon as it is idle
(``idle_after=0``); at most 1% of N runs are in flight at any moment. Reported: runs per
second, the process's peak resident memory (VmHWM) and memory per session.

Activation: an assistant whose log holds 1,000, 10,000 and 100,000 events (a compacted
transcript: what the model sees stays ~40 messages) is put to sleep, then asked its status; the
round trip minus the same question asked of a live agent is the activation's latency (load its
snapshot and the events after it from SQLite, rebuild the context, start the actor), beside
the same with snapshots off (the whole log folded). Target (issue 26): <= 5 ms, flat.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, fmt_time, parser

FULL_SESSIONS = 1_000_000
QUICK_SESSIONS = 2_000
PEAK_TARGET = 2 * 1024**3
ACTIVATION_TARGET = 0.005
ACTIVATION_SIZES = (1_000, 10_000, 100_000)
QUICK_ACTIVATION_SIZES = (200, 1_000)


def peak_rss() -> int:
    """The process's peak resident memory so far (VmHWM), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def sessions(count: int, folder: Path) -> dict[str, Any]:
    """Open, run once and put to sleep ``count`` sessions, 1% of them at a time."""
    from actors import Agent, Runtime
    from actors.store import SQLiteStore
    from actors.testing import ScriptedModel

    spec = Agent("assistant", model=ScriptedModel(["hello"], per_agent=True))
    window = max(1, count // 100)
    slots = threading.BoundedSemaphore(window)
    failures: list[str] = []
    gc.collect()
    base = peak_rss()
    with SQLiteStore(folder / "sessions.db") as store, Runtime(idle_after=0) as rt:
        began = time.perf_counter()
        for i in range(count):
            slots.acquire()
            ref = rt.open_session(spec, session_id=f"user-{i}", store=store)
            future = ref.run_async("hi")

            def done(f: Any) -> None:
                try:
                    f.result()
                except Exception as exc:  # a row, not a crash
                    failures.append(f"{type(exc).__name__}: {exc}")
                slots.release()

            future.add_done_callback(done)
        for _ in range(window):  # the last runs end
            slots.acquire()
        seconds = time.perf_counter() - began
        resident = rt.live_agents()
        peak = peak_rss()
    return {
        "sessions": count,
        "window": window,
        "seconds": seconds,
        "runs_per_s": count / seconds,
        "peak_rss_bytes": peak,
        "peak_rss_grown_bytes": max(0, peak - base),
        "bytes_per_session": max(0, peak - base) / count,
        "resident_at_end": resident,
        "failures": len(failures),
        "first_failure": failures[0] if failures else None,
    }


def compacted_log(events: int) -> list[Any]:
    """The log of a long-lived assistant whose transcript is compacted: ``events`` events.

    Turns of six events (turn start, user message, step, reply, usage, turn end); every 20
    turns the oldest messages are shadowed by one summary (a ``replace`` event, as compaction
    logs), so what the model sees stays about 40 messages long however long the log grows.
    """
    from actors.context._agent_context import AgentContext
    from actors.context._messages import AssistantMessage, SystemMessage, UserMessage
    from actors.context._usage import Usage

    ctx = AgentContext("long", name="long")
    ctx.add_message(SystemMessage(content="You are a helpful assistant."))
    turn = 0
    while ctx.event_count < events:
        turn += 1
        ctx.log_event("turn_start", {"run_id": f"run-{turn}"})
        ctx.add_message(UserMessage(content=f"message {turn}: what about the weather today?"))
        ctx.increment_iteration()
        ctx.add_message(AssistantMessage(content=f"reply {turn}: sunny, with a light breeze."))
        ctx.add_usage(Usage(requests=1, input_tokens=400, output_tokens=20))
        ctx.log_event("turn_end", {"run_id": f"run-{turn}", "reason": "completed"})
        if turn % 20 == 0 and ctx.message_count > 41:
            summary = UserMessage(content=f"(summary of the conversation up to turn {turn - 20})")
            ctx.replace_message_range(1, ctx.message_count - 40, summary)
    return list(ctx.events[:events])


def activation(folder: Path, sizes: tuple[int, ...], rounds: int) -> dict[str, Any]:
    """Latency of waking an assistant whose log holds each of ``sizes`` events.

    Each log is written to SQLite, restored, and put to sleep (which writes its snapshot);
    then, ``rounds`` times: a status question wakes it (asleep), a second one finds it awake,
    and it is put to sleep again. Activation = asleep - awake, the median. The same with
    snapshots off (``snapshot_every=None``: the whole log is folded) for comparison.
    """
    from actors import Agent, Runtime
    from actors.host._messages import Query
    from actors.store import AgentRecord, SQLiteStore
    from actors.testing import ScriptedModel

    spec = Agent("long", model=ScriptedModel(["ok"], per_agent=True))
    rows = []
    with SQLiteStore(folder / "activation.db") as store:
        for size in sizes:
            session = f"long-{size}"
            store.create_session(session, root_agent_id="long")
            store.put_agent(session, AgentRecord("long", None, "long", "idle"))
            log = compacted_log(size)
            for start in range(0, len(log), 5000):
                store.append_events(session, "long", log[start : start + 5000])
            row: dict[str, Any] = {"events": size}
            for label, every in (("snapshot", 1000), ("whole_log", None)):
                tries = rounds if every is not None else max(1, min(rounds, 200_000 // size))
                with Runtime(snapshot_every=every) as rt:
                    ref = rt.restore(session, store=store, agents=[spec])
                    host = rt._host
                    asleep, awake = [], []
                    for _ in range(tries):
                        assert ref.passivate()
                        began = time.perf_counter()
                        host.ask(ref.agent_id, Query("status"), 60.0)
                        asleep.append(time.perf_counter() - began)
                        began = time.perf_counter()
                        host.ask(ref.agent_id, Query("status"), 60.0)
                        awake.append(time.perf_counter() - began)
                wake, live = statistics.median(asleep), statistics.median(awake)
                row[label] = {"rounds": tries, "asleep_s": wake, "awake_s": live}
                row[label]["activation_s"] = wake - live
            rows.append(row)
    first = rows[0]["snapshot"]
    return {
        # The figures of the first size, as this section reported them before (summary table).
        "events": rows[0]["events"],
        "rounds": rounds,
        "asleep_s": first["asleep_s"],
        "awake_s": first["awake_s"],
        "activation_s": first["activation_s"],
        "target_s": ACTIVATION_TARGET,
        "rows": rows,
        "flat": max(r["snapshot"]["activation_s"] for r in rows)
        / max(min(r["snapshot"]["activation_s"] for r in rows), 1e-9),
    }


def measure(quick: bool, count: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="actors-virtual-") as name:
        folder = Path(name)
        sizes = QUICK_ACTIVATION_SIZES if quick else ACTIVATION_SIZES
        wake = activation(folder, sizes, 3 if quick else 30)
        crowd = sessions(count or (QUICK_SESSIONS if quick else FULL_SESSIONS), folder)
    return {"quick": quick, "sessions": crowd, "activation": wake, "peak_target": PEAK_TARGET}


def report(r: dict[str, Any]) -> str:
    s, a = r["sessions"], r["activation"]
    peak_ok = "met" if s["peak_rss_bytes"] <= PEAK_TARGET else "MISSED"
    wake_ok = "met" if a["activation_s"] <= ACTIVATION_TARGET else "MISSED"
    lines = [
        f"{s['sessions']:,} sessions over SQLite, {s['window']:,} in flight at a time: "
        f"{s['runs_per_s']:,.0f} runs/s ({s['seconds']:.1f} s), peak RSS "
        f"{s['peak_rss_bytes'] / 1024**2:,.0f} MiB (target <= 2 GiB: {peak_ok}), "
        f"{s['bytes_per_session']:,.0f} B per session, {s['resident_at_end']} in memory at the "
        f"end, {s['failures']} failed",
        f"activation of an assistant with {a['events']:,} events: "
        f"{fmt_time(a['activation_s'])} (asleep {fmt_time(a['asleep_s'])} - awake "
        f"{fmt_time(a['awake_s'])}; target <= 5 ms: {wake_ok})",
        "",
        "| events in the log | activation, from its snapshot | folding the whole log |",
        "| ---: | ---: | ---: |",
    ]
    for row in a["rows"]:
        snap, whole = row["snapshot"], row["whole_log"]
        lines.append(
            f"| {row['events']:,} | {fmt_time(snap['activation_s'])} "
            f"| {fmt_time(whole['activation_s'])} |"
        )
    lines.append(f"\nlargest / smallest activation from a snapshot: {a['flat']:.2f}x (flat: ~1)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--sessions", type=int, help="how many sessions (default 1,000,000)")
    args = p.parse_args(argv)
    result = measure(args.quick, args.sessions)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
