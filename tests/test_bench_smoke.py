"""The benchmark suite keeps working: ``python -m bench --quick --no-peers`` at tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(180)
def test_quick_bench_runs_every_section_and_writes_a_report(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--no-peers", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert done.returncode == 0, done.stderr[-2000:]

    results = json.loads(out.read_text())
    sections = results["sections"]
    sections_run = (
        "imports",
        "overhead",
        "fanout",
        "growth",
        "scale",
        "virtual",
        "retention",
        "serve",
        "compaction",
    )
    for name in (*sections_run, "sim", "ray"):
        assert "error" not in sections[name], (name, sections[name])
    overhead = sections["overhead"]
    assert 0 < overhead["raw_ask_s"] < 0.1
    assert 0 < overhead["hop_s"] < 0.1
    assert 0 < overhead["run_fresh_s"] < 1.0
    assert 0 < overhead["run_concurrent_s"] < 1.0
    fanout = sections["fanout"]
    assert fanout["wall_s"] >= fanout["latency_s"]  # no child answered before its model did
    assert all(row["spawned"] == row["agents"] for row in sections["scale"]["rows"])
    assert sections["imports"]["best_s"] > 0
    growth = sections["growth"]
    assert set(growth["runtime_s"]) == {str(mark) for mark in growth["marks"]}
    assert growth["runtime_ratio"] > 0
    assert growth["inline_ratio"] > 0
    assert "peers" not in sections
    served = sections["serve"]
    assert served["concurrency"]["threads_idle"] <= served["concurrency"]["threads_warm"]
    assert served["cold"]["cold_p50_s"] > 0
    ray = sections["ray"]
    assert 0 < ray["raw_call_s"] < 1.0
    assert 0 < ray["hop_s"] < 1.0
    assert ray["fanout"]["finished"] == ray["fanout"]["children"]
    assert ray["fanout"]["wall_s"] >= ray["fanout"]["latency_s"]
    assert ray["per_host"]["live"] == ray["per_host"]["agents"]

    report = done.stdout
    assert "| message hop" in report
    assert "| Ray: hop to an agent on a host" in report
    sim = sections["sim"]
    assert sim["steps"]["steps"] == 2 * sim["steps"]["agents"] * sim["steps"]["rounds"]
    assert sim["sweep"]["rows"] == sim["sweep"]["seeds"]
    assert sim["replay"]["same_log"]
    assert sim["replay"]["hits"] == sim["replay"]["steps"]  # every step answered from the file
    assert "### Simulation" in report
    sim_http = sections["sim_http"]
    assert "error" not in sim_http, sim_http
    assert sim_http["sim"]["requests"] == sim_http["raw"]["requests"] == 3 * sim_http["agents"]
    assert sim_http["server_max_in_flight"] > 1  # the simulation's requests overlapped
    assert "### Simulation with real models" in report
    http = sections["http"]
    assert "error" not in http, http
    for row in http["rows"].values():
        assert row["failed"] == 0, row
        assert row["finished"] == row["requests"] == http["agents"] * http["requests_each"]
    assert "### Real models over HTTP" in report
    assert "| compaction overhead" in report
    assert sections["compaction"]["session"]["compactions"] > 0
    assert "### Per-run overhead" in report
    assert "### One agent reused: per-run cost as its transcript grows" in report
    assert "not run (--no-peers)" in report
