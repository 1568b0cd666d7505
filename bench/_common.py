"""What every section shares: timing helpers, memory, machine facts and the command line."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def rss_bytes() -> int:
    """This process's resident memory (VmRSS from /proc/self/status), 0 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def thread_ceiling() -> dict[str, int | None]:
    """The kernel's and this user's limits on threads (what caps one-thread-per-actor)."""

    def read(path: str) -> int | None:
        try:
            return int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    try:
        import resource

        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        user_procs: int | None = None if nproc == resource.RLIM_INFINITY else nproc
    except (ImportError, ValueError):
        user_procs = None
    return {
        "threads_max": read("/proc/sys/kernel/threads-max"),
        "pid_max": read("/proc/sys/kernel/pid_max"),
        "user_procs": user_procs,
    }


def machine() -> dict[str, Any]:
    """The facts a table needs to be read: cores, CPU model, Python, OS."""
    model = platform.processor() or ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every section takes: ``--quick`` and ``--json PATH``."""
    first = (doc or "").strip().splitlines()[0] if doc else None
    p = argparse.ArgumentParser(description=first)
    p.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    p.add_argument("--json", type=Path, help="write the figures to this JSON file")
    return p


def finish(payload: dict[str, Any], path: Path | None, report: Callable[[], str]) -> int:
    """Print the section's human report; write its figures where asked."""
    print(report())
    if path is not None:
        path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return 0


def fmt_time(seconds: float) -> str:
    """Seconds in the unit that reads best: µs, ms or s."""
    if seconds != seconds:  # NaN
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def python() -> str:
    return sys.executable
