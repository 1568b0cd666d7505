"""Scale: 1,000 / 10,000 / 100,000 live idle agents: spawn, memory, threads, stop-all.

    .venv/bin/python bench/scale.py [--quick] [--json PATH]
    .venv/bin/python bench/scale.py --agents 10000      # one size, in this process

Each size runs in a fresh interpreter so its memory is its own. An agent is spawned with
`Runtime.spawn` (a small spec: a scripted model and one tool) and left idle; then the process's
resident memory (VmRSS) is read, minus what it held before the first spawn (imports, runtime),
and the agents are stopped all at once (leaving the runtime). Agents own no thread: their
mailboxes run on the runtime's workers, so the threads column must not grow with the agents.
Target (issue 13): 100,000 agents in <= 1 GiB (<= 10 KiB each), threads independent of the count.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, finish, fmt_time, parser, rss_bytes, thread_ceiling

MEMORY_TARGET = 1024**3
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (20, 100)


def echo(text: str) -> str:
    """Give the text back.

    Args:
        text: Anything.
    """
    return text


def bare_thread_start(n: int) -> float:
    """Seconds to start one bare thread now (the floor under a pykka actor's start)."""
    release = threading.Event()
    threads = [threading.Thread(target=release.wait) for _ in range(n)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    seconds = (time.perf_counter() - began) / n
    release.set()
    for thread in threads:
        thread.join()
    return seconds


def one_size(agents: int) -> dict[str, Any]:
    """Spawn ``agents`` idle agents in this process; measure; stop them."""
    from actors import Agent, Runtime
    from actors.testing import ScriptedModel

    spec = Agent("idle", model=ScriptedModel(["ok"], per_agent=True), tools=[echo])
    gc.collect()
    with Runtime() as runtime:
        rss_base = rss_bytes()
        threads_base = threading.active_count()
        spawned, error = 0, None
        began = time.perf_counter()
        try:
            for i in range(agents):
                runtime.spawn(spec, agent_id=f"a{i}")
                spawned += 1
        except Exception as exc:  # the thread ceiling, most likely: report it, do not crash
            error = f"{type(exc).__name__}: {exc}"
        spawn = time.perf_counter() - began
        gc.collect()
        rss = rss_bytes()
        threads = threading.active_count() - threads_base
        thread_start = bare_thread_start(200)
        began = time.perf_counter()
    shutdown = time.perf_counter() - began
    grown = max(0, rss - rss_base)
    return {
        "agents": agents,
        "spawned": spawned,
        "error": error,
        "spawn_total_s": spawn,
        "spawn_per_agent_s": spawn / max(1, spawned),
        "rss_bytes": rss,
        "rss_base_bytes": rss_base,
        "rss_per_agent_bytes": grown / max(1, spawned),
        "threads": threads,
        "bare_thread_start_s": thread_start,
        "shutdown_s": shutdown,
    }


def in_fresh_process(agents: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--agents", str(agents), "--raw"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"agents": agents, "spawned": 0, "error": " / ".join(tail) or "crashed"}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def measure(quick: bool) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else SIZES
    rows = [in_fresh_process(n) for n in sizes]
    return {
        "quick": quick,
        "rows": rows,
        "limits": thread_ceiling(),
        "target_rss_bytes": MEMORY_TARGET,
    }


def report(r: dict[str, Any]) -> str:
    lines = [
        "| agents | spawn / agent | bare thread start | RSS | RSS / agent | threads | stop all |"
    ]
    lines.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in r["rows"]:
        if row.get("spawned", 0) == 0:
            lines.append(f"| {row['agents']:,} | failed: {row.get('error')} | | | | | |")
            continue
        note = f" (only {row['spawned']:,}: {row['error']})" if row.get("error") else ""
        lines.append(
            f"| {row['agents']:,}{note} | {fmt_time(row['spawn_per_agent_s'])} "
            f"| {fmt_time(row['bare_thread_start_s'])} "
            f"| {row['rss_bytes'] / 1024**2:,.0f} MiB "
            f"| {row['rss_per_agent_bytes'] / 1024:,.1f} KiB | {row['threads']:,} "
            f"| {fmt_time(row['shutdown_s'])} |"
        )
    limits = r["limits"]
    lines.append(
        f"\nthread ceilings: kernel threads-max {limits['threads_max']}, pid_max "
        f"{limits['pid_max']}, RLIMIT_NPROC {limits['user_procs']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--agents", type=int, help="measure one size in this process")
    p.add_argument("--raw", action="store_true", help="with --agents: print one JSON line")
    args = p.parse_args(argv)
    if args.agents:
        row = one_size(args.agents)
        print(json.dumps(row) if args.raw else row)
        return 0
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
