from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from unittest.mock import ANY

import pytest

BENCH = Path(__file__).parents[2] / "bench" / "store.py"


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_store", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is being built.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_runs_at_tiny_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    out = tmp_path / "figures.json"
    assert bench.main(["--smoke", "--json", str(out)]) == 0

    printed = capsys.readouterr().out
    assert printed.startswith("| measure | store | batch | events | seconds | cpu s | events/s |")
    assert "batch mode, 10-event batches" in printed
    figures = json.loads(out.read_text())
    assert figures["smoke"] is True
    measures = {(r["measure"], r["store"], r["batch"]) for r in figures["results"]}
    for mode in ("sqlite batch", "sqlite sync"):
        assert ("append", mode, 10) in measures
        assert ("append", mode, 1) in measures
    assert ("load + deserialize (1 agent x 100)", "sqlite", 0) in measures
    assert ("load + deserialize (10 agents x 10)", "sqlite", 0) in measures
    assert all(r["events"] > 0 and r["seconds"] > 0 for r in figures["results"])
    # Postgres is measured next to SQLite when a server is reachable, else says it was skipped.
    if figures["skipped"]:
        assert figures["skipped"] == [{"store": "postgres", "reason": ANY}]
        assert "| append, restore | postgres | - | - | - | - | skipped: no " in printed
    else:
        assert ("append", "postgres", 10) in measures
        assert ("load + deserialize (1 agent x 100)", "postgres", 0) in measures


def test_without_a_server_postgres_is_skipped_not_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    for variable in bench.DSN_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    assert bench.main(["--smoke"]) == 0
    printed = capsys.readouterr().out
    assert "skipped: no server (pass --postgres DSN)" in printed
