"""`sweep` when runs fail: a world that raises, a worker that dies; the other rows are kept."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from actors.exceptions import SweepError
from actors.sim import SweepFailure, sweep

from .worlds import failing


@pytest.mark.parametrize("processes", [1, 2])
def test_a_run_that_raises_is_named_and_the_other_runs_rows_are_kept(processes: int) -> None:
    params = {"agents": [1, 2], "fail": ["2/2:raise"]}
    with pytest.raises(SweepError) as caught:
        sweep(failing, seeds=[1, 2], params=params, until=120.0, processes=processes)
    error = caught.value
    assert "1 of 4 sweep runs failed" in str(error)
    assert "seed 2, params {'agents': 2, 'fail': '2/2:raise'}" in str(error)
    assert "ValueError: no road out of town 2" in str(error)
    (failure,) = error.failures
    assert isinstance(failure, SweepFailure)
    assert (failure.seed, failure.params) == (2, {"agents": 2, "fail": "2/2:raise"})
    assert failure.error == "ValueError: no road out of town 2"
    assert "worlds.py" in failure.traceback  # where it was raised, in the user's code
    # The other three ran to their end, in the sweep's order, with their columns.
    assert [(r["seed"], r["agents"], r["count"]) for r in error.table] == [
        (1, 1, 2),
        (2, 1, 2),
        (1, 2, 4),
    ]
    assert error.table.columns[:3] == ["seed", "agents", "fail"]


@pytest.mark.timeout(180)
def test_a_worker_that_dies_is_named_and_the_other_runs_finish_once(tmp_path: Path) -> None:
    log = tmp_path / "started.log"
    # Seed 2 ends its process (os._exit), seed 5 is SIGKILLed (as by the out-of-memory killer).
    params = {"agents": [1], "fail": ["2/1:exit,5/1:kill"], "log": [str(log)]}
    seeds = [1, 2, 3, 4, 5, 6]
    with pytest.raises(SweepError) as caught:
        sweep(failing, seeds=seeds, params=params, until=120.0, processes=2)
    error = caught.value
    assert [(f.seed, f.params["agents"]) for f in error.failures] == [(2, 1), (5, 1)]
    died, killed = error.failures
    assert died.error == "the worker process died (exit code 1)"
    assert "killed by SIGKILL" in killed.error
    assert "seed 2, params {'agents': 1" in str(error)
    assert "seed 5, params {'agents': 1" in str(error)
    assert [(r["seed"], r["count"]) for r in error.table] == [(s, 2) for s in (1, 3, 4, 6)]
    # A run that killed its worker was run again alone (where it was named), and never again; a
    # run that shared the broken pool with it may be run a second time, never a third.
    starts = Counter(log.read_text().split())
    assert set(starts) == {f"{s}/1" for s in seeds}
    assert max(starts.values()) <= 2
