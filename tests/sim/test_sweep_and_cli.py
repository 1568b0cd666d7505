"""`sweep` over seeds and parameters, and ``actors simulate`` as a user runs it."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.cli._simulate import _Progress
from actors.exceptions import UserError
from actors.sim import RequestStats, Simulation, SimulationSettings, sweep
from bench.wire_server import serve

from .worlds import counter, relay_ring

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


@pytest.mark.timeout(120)
def test_sweep_runs_every_seed_and_combination_in_processes_and_matches_one_process() -> None:
    params = {"agents": [1, 2], "latency": [1.0]}
    table = sweep(counter, seeds=[1, 2], params=params, until=180.0, processes=2)
    assert table.columns[:3] == ["seed", "agents", "latency"]
    assert [(r["seed"], r["agents"]) for r in table] == [(1, 1), (2, 1), (1, 2), (2, 2)]
    assert [r["count"] for r in table] == [3, 3, 6, 6]
    jitter = table.column("jitter")
    assert jitter[0] != jitter[1]  # seeds differ
    inline = sweep(counter, seeds=[1, 2], params=params, until=180.0, processes=1)
    assert inline.rows == table.rows  # the same table whatever the number of processes


def test_sweep_all_rows_and_bad_input() -> None:
    table = sweep(counter, seeds=[3], until=120.0, rows="all", processes=1)
    assert table.column("time") == [0.0, 60.0, 120.0]
    with pytest.raises(UserError, match="at least one seed"):
        sweep(counter, seeds=[])
    with pytest.raises(UserError, match="non-empty list"):
        sweep(counter, seeds=[1], params={"agents": 3})  # type: ignore[dict-item]
    with pytest.raises(UserError, match="pickled"):
        sweep(lambda sim: None, seeds=[1, 2], processes=2)


def actors_cli(*args: str, cwd: Path, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_vars}
    return subprocess.run(
        [sys.executable, "-m", "actors.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


@pytest.mark.timeout(120)
def test_actors_simulate_writes_the_log_series_chart_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = actors_cli(
        "simulate",
        str(HERE / "worlds.py") + ":counter",
        "--seed",
        "4",
        "--until",
        "300",
        "--param",
        "agents=2",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "simulated 300 virtual s" in done.stdout
    assert "last sample (t=300): count=10" in done.stdout
    assert "100%" in done.stderr  # the progress bar reached the end
    lines = (out / "events.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["agent_id"] == "bumper"
    assert (out / "series.csv").read_text().splitlines()[0] == "time,count,jitter"
    svg = (out / "chart.svg").read_text()
    assert svg.startswith("<svg")
    assert ">count<" in svg
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 4
    assert summary["agents"] == 2
    assert summary["params"] == {"agents": 2}
    actors_cli(
        "simulate", str(HERE / "worlds.py") + ":counter", "--seed", "4", "--until", "300",
        "--param", "agents=2", "--out", str(tmp_path / "again"), cwd=tmp_path,
    )  # fmt: skip
    assert (tmp_path / "again" / "events.jsonl").read_bytes() == (out / "events.jsonl").read_bytes()


@pytest.mark.timeout(120)
def test_ctrl_c_during_actors_simulate_still_writes_what_was_simulated(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = actors_cli(
        "simulate", str(HERE / "worlds.py") + ":interrupted", "--seed", "4", "--until", "600",
        "--out", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 130
    assert "interrupted at t=150" in done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert (out / "series.csv").read_text().splitlines()[-1].startswith("120.0,")  # the last sample
    assert (out / "events.jsonl").read_text().count("\n") > 0


def test_actors_simulate_names_what_is_wrong(tmp_path: Path) -> None:
    missing = actors_cli("simulate", "nowhere.py:world", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no file" in missing.stderr
    bad = actors_cli("simulate", str(HERE / "worlds.py") + ":counter", "--param", "x", cwd=tmp_path)
    assert bad.returncode == 2
    assert "NAME=VALUE" in bad.stderr
    wrong = actors_cli(
        "simulate", str(HERE / "worlds.py") + ":not_a_world", "--param", "a=1", cwd=tmp_path
    )
    assert wrong.returncode == 2
    assert "could not build the world" in wrong.stderr
    negative = actors_cli(
        "simulate", str(HERE / "worlds.py") + ":counter", "--message-delay", "-1", cwd=tmp_path
    )
    assert negative.returncode == 2
    assert "message_delay cannot be negative" in negative.stderr


# -- one world, one simulation: from Python, from the command line, in a sweep --------------------


def python_run(tmp_path: Path, name: str, **overrides: float) -> tuple[bytes, Simulation]:
    sim = Simulation.for_world(relay_ring, seed=2, **overrides)
    relay_ring(sim)
    sim.run(until=300.0)
    sim.export_jsonl(tmp_path / name)
    return (tmp_path / name).read_bytes(), sim


@pytest.mark.timeout(120)
def test_a_world_gives_the_same_log_from_python_and_from_the_cli(tmp_path: Path) -> None:
    # The world declares message_delay and tool_duration; the CLI used to ignore them (a
    # user's CLI run gave 4,692 events where the same world in Python gave 4,825).
    expected, sim = python_run(tmp_path, "python.jsonl")
    assert sim.settings.message_delay == 45.0
    out = tmp_path / "cli"
    world = str(HERE / "worlds.py") + ":relay_ring"
    done = actors_cli(
        "simulate", world, "--seed", "2", "--until", "300", "--out", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (out / "events.jsonl").read_bytes() == expected
    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["message_delay"] == 45.0
    assert summary["settings"]["tool_duration"] == 5.0
    # Without the world's settings the same world is another world.
    plain = Simulation(seed=2)
    relay_ring(plain)
    plain.run(until=300.0)
    assert len(plain.events) != len(sim.events)
    # An option on the command line overrides the world's setting, as an argument does.
    faster, _ = python_run(tmp_path, "faster.jsonl", message_delay=10.0)
    done = actors_cli(
        "simulate", world, "--seed", "2", "--until", "300", "--message-delay", "10",
        "--out", str(tmp_path / "faster"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "faster" / "events.jsonl").read_bytes() == faster != expected
    summary = json.loads((tmp_path / "faster" / "summary.json").read_text())
    assert summary["settings"]["message_delay"] == 10.0


def test_a_sweep_makes_the_world_with_its_settings(tmp_path: Path) -> None:
    _, sim = python_run(tmp_path, "python.jsonl")
    (row,) = sweep(relay_ring, seeds=[2], until=300.0, processes=1)
    assert row["steps"] == sim.steps
    (other,) = sweep(relay_ring, seeds=[2], until=300.0, processes=1, message_delay=0.0)
    assert other["steps"] != sim.steps
    with pytest.raises(UserError, match="message_dealy is not a simulation setting"):
        sweep(relay_ring, seeds=[2], message_dealy=1.0)


def test_simulation_settings_are_every_setting_of_a_simulation_but_the_seed() -> None:
    parameters = set(inspect.signature(Simulation).parameters) - {"seed"}
    assert {field.name for field in dataclasses.fields(SimulationSettings)} == parameters
    settings = SimulationSettings(message_delay=1.5)

    def world(sim: Simulation) -> None:
        pass

    assert settings(world) is world
    assert Simulation.for_world(world).settings.message_delay == 1.5
    assert Simulation.for_world(world, message_delay=3.0).settings.message_delay == 3.0
    chosen = SimulationSettings(tool_duration=2.0)
    made = Simulation.for_world(world, settings=chosen)
    assert (made.settings.tool_duration, made.settings.message_delay) == (2.0, 0.0)
    assert Simulation.for_world(counter).settings == Simulation(seed=0).settings
    with pytest.raises(UserError, match="cannot be negative"):
        Simulation.for_world(world, message_delay=-1.0)
    with pytest.raises(UserError, match="decorates a world function"):
        SimulationSettings()(3)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_actors_simulate_shows_real_model_requests_in_its_progress(tmp_path: Path) -> None:
    with serve(latency=0.3) as url:
        done = actors_cli(
            "simulate", str(HERE / "worlds.py") + ":askers", "--param", f"url={url}",
            "--until", "1", "--out", str(tmp_path / "out"),
            cwd=tmp_path, ACTORS_ALLOW_MODEL_REQUESTS="1",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "100%" in lines[-1]
    assert "requests: 0 in flight, 4 done, 0 failed" in lines[-1]
    assert "model requests: 4 done, 0 failed" in done.stdout


def test_the_progress_line_shows_requests_without_a_horizon() -> None:
    out = io.StringIO()
    progress = _Progress(None, out, lambda: RequestStats(2, 1_500, 1, 45_210))
    progress(12.5)
    assert out.getvalue() == (
        "t=12.5  requests: 2 in flight, 1,500 done, 1 failed, 45,210 tokens\n"
    )
    quiet = io.StringIO()
    _Progress(None, quiet, lambda: RequestStats())(3.0)  # scripted models only: nothing
    assert quiet.getvalue() == ""
