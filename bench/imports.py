"""``import actors`` time in a fresh interpreter, best of N, and what it spends it on.

    .venv/bin/python bench/imports.py [--quick] [--json PATH]

Each try is a new interpreter that times ``import actors`` itself (interpreter start-up
excluded). The slowest top-level dependencies come from ``python -X importtime``.
Target (issue 9): <= 0.3 s.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import ROOT, finish, fmt_time, parser

TARGET = 0.3
PROBE = (
    "import time; began = time.perf_counter(); import {module}; print(time.perf_counter() - began)"
)


def import_time(module: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _importtime(code: str) -> list[tuple[str, int]]:
    """(module, cumulative µs) for each module ``python -X importtime -c code`` imported."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
            rows.append((name.strip(), int(cumulative_us)))
    return rows


def heaviest(module: str, top: int = 8) -> list[dict[str, Any]]:
    """The packages that cost most to import, by cumulative time (``-X importtime``).

    Only packages that ``import module`` brings in (not the interpreter's start-up); a package
    imported by another counts in both.
    """
    startup = {name for name, _ in _importtime("pass")}
    rows = [
        {"module": name, "cumulative_s": us / 1e6}
        for name, us in _importtime(f"import {module}")
        if "." not in name and name != module and name not in startup
    ]
    rows.sort(key=lambda row: row["cumulative_s"], reverse=True)
    return rows[:top]


def measure(quick: bool) -> dict[str, Any]:
    tries = 1 if quick else 9
    times = [import_time("actors") for _ in range(tries)]
    return {
        "quick": quick,
        "tries": tries,
        "best_s": min(times),
        "times_s": times,
        "heaviest": [] if quick else heaviest("actors"),
        "target_s": TARGET,
    }


def report(r: dict[str, Any]) -> str:
    ok = "met" if r["best_s"] <= TARGET else "MISSED"
    parts = ", ".join(f"{row['module']} {fmt_time(row['cumulative_s'])}" for row in r["heaviest"])
    line = (
        f"import actors: {fmt_time(r['best_s'])} best of {r['tries']} (target <= {TARGET} s: {ok})"
    )
    return line + (f"\nheaviest (one run, -X importtime): {parts}" if parts else "")


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    result = measure(args.quick)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
