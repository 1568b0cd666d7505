"""Where the time of one actors run goes: cProfile on every thread, over 2,000 runs.

    .venv/bin/python bench/profile_run.py [--runs 2000] [--reused | --inline] [--top 30]

The same agent as bench/run_overhead.py (a scripted model makes one tool call, then answers),
a fresh agent per run, spawn and stop included (they are the lifecycle of a run here). A run
crosses three threads (the host, the agent's actor, the effects' event loop), so each thread
gets its own profiler and the statistics are merged; time spent blocked (lock waits, the
selector) shows up as such and is left out of the "own time" listing. cProfile slows every
thread several times over, and most in code with many small calls: read the shares, not the
absolute times. ``--inline`` profiles the agent loop alone (no actor, thread or event loop,
see `bench.run_overhead.state_machine`), where cProfile is exact.

For a sampling profile of all threads with little overhead, py-spy (not a dependency) does:
``py-spy record --gil -r 1000 -f raw -o out.txt -- .venv/bin/python bench/profile_run.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WAITS = ("acquire", "select", "poll", "wait", "sleep", "join", "of '_queue.SimpleQueue'")

profiles: list[cProfile.Profile] = []
_lock = threading.Lock()
_original_run = threading.Thread.run


def _profiled_run(self: threading.Thread) -> None:
    profile = cProfile.Profile()
    with _lock:
        profiles.append(profile)
    profile.enable()
    try:
        _original_run(self)
    finally:
        profile.disable()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=2_000)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--reused", action="store_true", help="one agent for every run")
    how.add_argument("--inline", action="store_true", help="the agent loop alone, no threads")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    args = p.parse_args(argv)

    from actors import Runtime
    from bench.run_overhead import spec, state_machine

    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    main_profile = cProfile.Profile()
    profiles.append(main_profile)
    began = time.perf_counter()
    if args.inline:
        main_profile.enable()
        state_machine(args.runs)
        main_profile.disable()
    else:
        with Runtime() as runtime:
            main_profile.enable()
            if args.reused:
                ref = runtime.spawn(spec(args.runs))
                for _ in range(args.runs):
                    ref.run("go", timeout=30)
            else:
                agent = spec()
                for i in range(args.runs):
                    ref = runtime.spawn(agent, agent_id=f"a{i}")
                    ref.run("go", timeout=30)
                    ref.stop()
            main_profile.disable()
    wall = time.perf_counter() - began
    threading.Thread.run = _original_run  # type: ignore[method-assign]

    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        with contextlib.suppress(TypeError):  # a thread that never ran profiled code
            stats.add(profile)
    print(f"{args.runs} runs in {wall:.2f} s ({wall / args.runs * 1e3:.3f} ms a run, profiled)")
    ranked: list[tuple[float, Any, Any]] = []
    for func, (_cc, calls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        name = func[2]
        if any(w in name for w in WAITS) and func[0] == "~":
            continue
        ranked.append((tottime if args.sort == "tottime" else cumtime, func, calls))
    ranked.sort(key=lambda row: row[0], reverse=True)
    print(f"{'own' if args.sort == 'tottime' else 'cumulative'} ms/run  calls/run  function")
    for seconds, (filename, line, name), calls in ranked[: args.top]:
        where = filename.split("site-packages/")[-1].split("/work/main/")[-1]
        print(
            f"{seconds / args.runs * 1e3:10.4f}  {calls / args.runs:9.1f}  {where}:{line}({name})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
