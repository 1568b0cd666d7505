"""Virtual agents: a million sessions over SQLite, 1% in memory at a time; activation latency.

    .venv/bin/python -m bench.virtual [--quick] [--json PATH]
    .venv/bin/python -m bench.virtual --sessions 100000     # another size

Sessions: each of N sessions is opened with `Runtime.open_session` (a new agent in a SQLite
file), runs once with a scripted model, and is passivated as soon as it is idle
(``idle_after=0``); at most 1% of N runs are in flight at any moment. Reported: runs per
second, the process's peak resident memory (VmHWM) and memory per session.

Activation: an agent with a log of about 1,000 events is put to sleep, then asked its status;
the round trip minus the same question asked of a live agent is the activation's latency
(load from SQLite, rebuild the context, start the actor). Target (issue 13): <= 10 ms.
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
ACTIVATION_TARGET = 0.010


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


def activation(folder: Path, rounds: int) -> dict[str, Any]:
    """Latency of waking an agent whose log holds about 1,000 events."""
    from actors import Agent, Runtime
    from actors.runtime._host import Query
    from actors.store import SQLiteStore
    from actors.testing import ScriptedModel

    spec = Agent("long", model=ScriptedModel(["ok"] * 400, per_agent=True))
    with SQLiteStore(folder / "activation.db") as store, Runtime() as rt:
        ref = rt.spawn(spec, store=store, session_id="long")
        while len(ref.context().events) < 1_000:
            ref.run("again")
        events = len(ref.context().events)
        host = rt._host
        asleep, awake = [], []
        for _ in range(rounds):
            assert ref.passivate()
            began = time.perf_counter()
            host.ask(ref.agent_id, Query("status"), 10.0)
            asleep.append(time.perf_counter() - began)
            began = time.perf_counter()
            host.ask(ref.agent_id, Query("status"), 10.0)
            awake.append(time.perf_counter() - began)
    wake, live = statistics.median(asleep), statistics.median(awake)
    return {
        "events": events,
        "rounds": rounds,
        "asleep_s": wake,
        "awake_s": live,
        "activation_s": wake - live,
        "target_s": ACTIVATION_TARGET,
    }


def measure(quick: bool, count: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="actors-virtual-") as name:
        folder = Path(name)
        wake = activation(folder, 5 if quick else 30)
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
        f"activation of an agent with {a['events']:,} events: {fmt_time(a['activation_s'])} "
        f"(asleep {fmt_time(a['asleep_s'])} - awake {fmt_time(a['awake_s'])}; "
        f"target <= 10 ms: {wake_ok})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--sessions", type=int, help="how many sessions (default 1,000,000)")
    args = p.parse_args(argv)
    result = measure(args.quick, args.sessions)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
