"""``actors simulate MODULE:WORLD``: run a world in a `Simulation`, export what happened."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actors.cli._errors import CliError
from actors.cli._target import _import_file, _import_module, _is_path, _split
from actors.exceptions import UserError
from actors.sim import RequestStats, Simulation
from actors.sim._settings import describe

__all__ = ["add_parser", "load_world", "simulate"]

_HINT = "write MODULE:WORLD, where WORLD(sim, **params) builds the world onto the simulation"


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors simulate`` to the command parser."""
    parser = commands.add_parser(
        "simulate",
        parents=[parent],
        help="run a simulation world on a virtual clock and export its log, series and chart",
        description=(
            "Import WORLD from MODULE (a module or a path/to/file.py), build it onto a "
            "Simulation of the given seed (with the settings the world declares: "
            "@SimulationSettings(...) on it; the options below override them), run it until "
            "the given virtual time, and write to DIR: events.jsonl (the whole event log, in "
            "delivery order), series.csv (and series.parquet with pyarrow), chart.svg of the "
            "collected series, summary.json."
        ),
    )
    parser.add_argument("target", metavar="MODULE:WORLD", help="the world function")
    parser.add_argument("--seed", type=int, default=0, help="the seed (default 0)")
    parser.add_argument(
        "--until", type=float, default=None, help="virtual seconds to run (default: until idle)"
    )
    parser.add_argument(
        "--message-delay",
        metavar="SECONDS",
        type=float,
        default=None,
        help="virtual seconds a peer message travels (overrides the world's setting)",
    )
    parser.add_argument(
        "--tool-duration",
        metavar="SECONDS",
        type=float,
        default=None,
        help="virtual seconds a tool call takes (overrides the world's setting)",
    )
    parser.add_argument("--out", metavar="DIR", default="sim-out", help="where to write")
    parser.add_argument(
        "--param",
        metavar="NAME=VALUE",
        action="append",
        default=[],
        help="a parameter for WORLD (VALUE read as JSON, else as text); repeatable",
    )
    parser.set_defaults(handler=simulate)


def load_world(target: str) -> Callable[..., Any]:
    """Import ``MODULE:WORLD`` and return the world function.

    Raises:
        CliError: The module or function is missing, or it is not callable.
    """
    module_name, attr = _split(target)
    module = (
        _import_file(Path(module_name)) if _is_path(module_name) else _import_module(module_name)
    )
    value = getattr(module, attr, None)
    if value is None or not callable(value):
        raise CliError(f"{target} does not name a function", _HINT, code=2)
    return value  # type: ignore[no-any-return]


def _params(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.isidentifier():
            raise CliError(f"--param {pair!r} is not NAME=VALUE", "e.g. --param agents=100", code=2)
        try:
            params[name] = json.loads(raw)
        except json.JSONDecodeError:
            params[name] = raw
    return params


class _Progress:
    """A one-line progress bar on a terminal; a few plain lines otherwise.

    With real models it also shows their requests: in flight, done, failed, and tokens; it is
    then redrawn while the simulation waits for replies, not only as virtual time moves.
    """

    def __init__(
        self, until: float | None, stream: Any, requests: Callable[[], RequestStats] | None = None
    ) -> None:
        self.until = until
        self.stream = stream
        self.requests = requests
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last = -1
        self.shown = ""
        self.began = time.perf_counter()
        self.drawn = float("-inf")  # the first counts show at once

    def _requests(self) -> str:
        stats = self.requests() if self.requests is not None else None
        if stats is None or not (stats.in_flight or stats.done or stats.failed):
            return ""
        return (
            f"  requests: {stats.in_flight:,} in flight, {stats.done:,} done, "
            f"{stats.failed:,} failed, {stats.tokens:,} tokens"
        )

    def __call__(self, now: float) -> None:
        requests = self._requests()
        if not self.until and not requests:
            return
        percent = min(100, int(now / self.until * 100)) if self.until else -1
        wall = time.perf_counter()
        if self.tty:
            # A new percent, or new counts at most five times a second.
            due = percent != self.last or (requests != self.shown and wall - self.drawn >= 0.2)
        else:
            # Plain lines: each quarter, and every 10 s while waiting on real models.
            due = (percent != self.last and (percent % 25 == 0 or percent == 100)) or (
                requests != self.shown and wall - self.drawn >= 10
            )
        if not due:
            return
        self.last, self.shown, self.drawn = percent, requests, wall
        if self.until:
            bar = "#" * (percent // 4) + "-" * (25 - percent // 4)
            text = f"[{bar}] {percent:3d}%  t={now:g}/{self.until:g}{requests}"
        else:
            text = f"t={now:g}{requests}"
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K")  # clear what a longer line left
            if percent == 100:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def simulate(args: argparse.Namespace) -> int:
    """``actors simulate``."""
    world = load_world(args.target)
    params = _params(args.param)
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file", "name a folder (it is created if missing)", code=2)
    out.mkdir(parents=True, exist_ok=True)
    overrides = {
        name: value
        for name, value in (
            ("message_delay", args.message_delay),
            ("tool_duration", args.tool_duration),
        )
        if value is not None
    }
    try:
        # The same simulation as Simulation.for_world(world, seed=...) in Python.
        sim = Simulation.for_world(world, seed=args.seed, **overrides)
    except UserError as exc:
        raise CliError(str(exc), "see actors simulate --help", code=2) from exc
    try:
        world(sim, **params)
    except TypeError as exc:
        raise CliError(f"{args.target} could not build the world: {exc}", _HINT, code=2) from exc
    began = time.perf_counter()
    interrupted = False
    try:
        progress = _Progress(args.until, sys.stderr, lambda: sim.requests)
        sim.run(until=args.until, progress=progress)
    except KeyboardInterrupt:  # Ctrl-C: what was simulated is written all the same
        interrupted = True
        sys.stderr.write(f"\ninterrupted at t={sim.now:g}: writing what was simulated so far\n")
    wall = time.perf_counter() - began
    written = [out / "events.jsonl", out / "series.csv", out / "chart.svg", out / "summary.json"]
    sim.export_jsonl(written[0])
    table = sim.rows()
    table.to_csv(written[1])
    table.to_svg(written[2], title=f"{args.target} (seed {args.seed})")
    if importlib.util.find_spec("pyarrow") is not None:
        table.to_parquet(out / "series.parquet")
        written.append(out / "series.parquet")
    if importlib.util.find_spec("matplotlib") is not None:
        written.append(_png(table, out / "chart.png"))
    summary = {
        **sim.summary(),
        "wall_s": round(wall, 3),
        "params": params,
        "settings": describe(sim.settings),
        "interrupted": interrupted,
    }
    written[3].write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    steps_per_s = sim.steps / wall if wall > 0 else 0.0
    print(
        f"simulated {sim.now:g} virtual s in {wall:.2f} s: {summary['agents']} agents, "
        f"{sim.steps} steps ({steps_per_s:,.0f}/s), {summary['events']} events"
    )
    requests = sim.requests
    if requests.done or requests.failed:
        print(
            f"model requests: {requests.done:,} done, {requests.failed:,} failed, "
            f"{requests.tokens:,} tokens"
        )
    if table.rows:
        last = table.rows[-1]
        values = ", ".join(f"{k}={v}" for k, v in last.items() if k != "time")
        print(f"last sample (t={last['time']:g}): {values}")
    for path in written:
        print(f"wrote {path}")
    if interrupted:
        raise CliError(
            f"interrupted at t={sim.now:g}",
            "the files written hold the simulation up to then",
            code=130,
        )
    return 0


def _png(table: Any, path: Path) -> Path:
    importlib.import_module("matplotlib").use("Agg")
    pyplot = importlib.import_module("matplotlib.pyplot")

    figure, axes = pyplot.subplots(figsize=(8, 4.5))
    times = table.column("time")
    for name in table.columns[1:]:
        values = table.column(name)
        if all(isinstance(v, int | float) for v in values):
            axes.plot(times, values, label=name)
    axes.set_xlabel("time (virtual seconds)")
    axes.legend()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path
