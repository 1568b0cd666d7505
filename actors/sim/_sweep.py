"""`sweep`: one simulation per seed and parameter combination, in parallel processes."""

from __future__ import annotations

import concurrent.futures
import gc
import inspect
import itertools
import multiprocessing
import os
import pickle
import signal
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

from actors.exceptions import SweepError, UserError
from actors.sim._settings import settings_of
from actors.sim._simulation import Simulation
from actors.sim._table import Table

__all__ = ["SweepFailure", "run_one", "sweep"]

World = Callable[..., Any]
"""Builds a world onto a simulation: ``world(sim, **params)``."""

Job = tuple[World, int | str, Mapping[str, Any], float | None, Literal["last", "all"], Any]
"""One run's arguments to `run_one`."""

Outcome = tuple[Literal["ok", "failed"], Any, str]
"""``("ok", rows, "")``, or ``("failed", what went wrong, traceback text)``."""


@dataclass(frozen=True)
class SweepFailure:
    """One run of a sweep that failed (see `actors.exceptions.SweepError`).

    Attributes:
        seed: The run's seed.
        params: The run's parameters.
        error: What went wrong, in one line: the exception (``"ValueError: no road"``), or how
            the worker process died (``"the worker process died (exit code 1)"``).
        traceback: The exception's traceback in the worker ("" when the process died).
    """

    seed: int | str
    params: dict[str, Any]
    error: str
    traceback: str = ""


def run_one(
    world: World,
    seed: int | str,
    params: Mapping[str, Any],
    until: float | None,
    rows: Literal["last", "all"],
    options: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Build and run one simulation; its rows, each with its seed and parameters."""
    sim = Simulation.for_world(world, seed=seed, **options)
    world(sim, **params)
    sim.run(until=until)
    table = sim.rows()
    head = {"seed": seed, **params}
    tail = {"steps": sim.steps, "deliveries": sim.deliveries, "end": sim.now}
    del sim
    # A simulation's objects hold each other (agents, their host, their logs): free them now,
    # in one collection, not at the next run's expense (its spawns would rescan them all: a
    # second run in the same worker took twice as long to build its world).
    gc.collect()
    if rows == "all":
        return [{**head, **row} for row in table.rows]
    last = dict(table.rows[-1]) if table.rows else {}
    last.pop("time", None)
    return [{**head, **last, **tail}]


def _attempt(job: Job) -> Outcome:
    """Run one job; an exception of the world (or of its run) comes back as text.

    Text, not the exception: an exception of the user's code may not pickle, and its traceback
    is what the user needs to find the fault.
    """
    try:
        return ("ok", run_one(*job), "")
    except (Exception, SystemExit) as exc:  # sys.exit() in a world fails its run, not the sweep
        return ("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc())


def _run_in_processes(jobs: Sequence[Job], workers: int) -> list[Outcome]:
    """Every job's outcome, in order, on ``workers`` processes, whatever kills one of them.

    A worker that dies breaks a `ProcessPoolExecutor` for every future it holds, and nothing
    says which job killed it. So at most ``workers`` jobs are in the pool at a time (the
    suspects of a break are known), a break runs each suspect again alone in a process of its
    own (the one that dies there is the culprit, with its exit code; the others finish), and a
    fresh pool takes the jobs that were never started. A finished job is never run again.
    """
    context = multiprocessing.get_context("spawn")
    outcomes: dict[int, Outcome] = {}
    todo = deque(range(len(jobs)))
    while todo:
        suspects = _run_pool(jobs, todo, workers, context, outcomes)
        for index in suspects:
            outcomes[index] = _run_alone(jobs[index], context)
    return [outcomes[index] for index in range(len(jobs))]


def _run_pool(
    jobs: Sequence[Job],
    todo: deque[int],
    workers: int,
    context: Any,
    outcomes: dict[int, Outcome],
) -> list[int]:
    """Run jobs of ``todo`` in one pool until it is done or broken; a break's suspects back."""
    running: dict[concurrent.futures.Future[Outcome], int] = {}
    suspects: list[int] = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        while (todo or running) and not suspects:
            while todo and len(running) < workers:
                index = todo.popleft()
                running[pool.submit(_attempt, jobs[index])] = index
            done, _ = concurrent.futures.wait(running, return_when="FIRST_COMPLETED")
            for future in done:
                _settle(future, running.pop(future), outcomes, suspects)
    for future, index in running.items():  # the pool broke: each of these finished or failed
        _settle(future, index, outcomes, suspects)
    return sorted(suspects)


def _settle(
    future: concurrent.futures.Future[Outcome],
    index: int,
    outcomes: dict[int, Outcome],
    suspects: list[int],
) -> None:
    error = future.exception()
    if isinstance(error, BrokenProcessPool):
        suspects.append(index)
    elif error is not None:  # not the world's (that is an outcome): its result did not pickle
        text = "".join(traceback.format_exception(error))
        outcomes[index] = ("failed", f"{type(error).__name__}: {error}", text)
    else:
        outcomes[index] = future.result()


def _run_alone(job: Job, context: Any) -> Outcome:
    """Run one job in a process of its own: its outcome, or how that process died."""
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_alone_main, args=(sender, job), daemon=True)
    process.start()
    sender.close()  # the child holds the only sender: its death is an EOF here
    try:
        outcome: Outcome = receiver.recv()
    except EOFError:
        process.join()
        return ("failed", _death(process.exitcode), "")
    finally:
        receiver.close()
    process.join()
    return outcome


def _alone_main(sender: Connection, job: Job) -> None:
    sender.send(_attempt(job))
    sender.close()


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the out-of-memory killer sends it)" if exitcode == -signal.SIGKILL else ""
        return f"the worker process died: killed by {name}{hint}"
    return f"the worker process died (exit code {exitcode})"


def _failed(failures: Sequence[SweepFailure], runs: int) -> str:
    shown = [f"seed {f.seed!r}, params {f.params!r}: {f.error}" for f in failures[:5]]
    more = f"; and {len(failures) - 5} more" if len(failures) > 5 else ""
    return (
        f"{len(failures)} of {runs} sweep runs failed: {'; '.join(shown)}{more}. The other "
        "runs finished: their rows are on the error's .table, each failure (with its "
        "traceback) on .failures"
    )


def sweep(
    world: World,
    *,
    seeds: Iterable[int | str],
    params: Mapping[str, Sequence[Any]] | None = None,
    until: float | None = None,
    rows: Literal["last", "all"] = "last",
    processes: int | None = None,
    **options: Any,
) -> Table:
    """Run ``world`` for every seed and every combination of ``params``; one table back.

    Each run builds a fresh `Simulation` (`Simulation.for_world`: the settings the world
    declared, ``options`` over them), calls ``world(sim, **params)``,
    runs it until ``until`` and keeps its collected series (`Simulation.collect`). Runs go to
    separate processes (a simulation is single-threaded: processes are what use more cores);
    each run is deterministic, so the table is the same whatever the number of processes.

    Args:
        world: A module-level function (it is pickled to the processes).
        seeds: The seeds.
        params: Values to try per parameter name; every combination is run with every seed.
        until: Virtual time each run stops at (None: when only recurring calls are left).
        rows: ``"last"``: one row per run (its last sample, with ``steps``, ``deliveries`` and
            the ``end`` time); ``"all"``: every sample of every run, with a ``time`` column.
        processes: Worker processes (default: the CPU count; 1 runs in this process).
        **options: Settings of each `Simulation` (``tool_duration``, ``message_delay``...),
            over the world's own (`SimulationSettings`).

    Returns:
        A `Table` with ``seed``, the parameter columns, then the series.

    Raises:
        UserError: no seeds, a parameter without values, or a world that cannot be pickled.
        SweepError: runs failed (their world raised, or their worker process died), once every
            other run has finished: it names each failed run's seed and parameters and
            carries the other runs' rows (``.table``).
    """
    if not callable(world):
        raise UserError(f"sweep() takes a world function, world(sim, **params), got {world!r}")
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Iterable):
        raise UserError(f"seeds must be a list of ints or strings, got {seeds!r}")
    if params is not None and not isinstance(params, Mapping):
        raise UserError(f"params must map a parameter's name to its values, got {params!r}")
    settings_of(world).replace(**options)  # a setting that does not exist: say so here
    seed_list = list(seeds)
    if not seed_list:
        raise UserError("sweep() needs at least one seed")
    if rows not in ("last", "all"):
        raise UserError(f"rows must be 'last' or 'all', got {rows!r}")
    grid = dict(params or {})
    for name, values in grid.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise UserError(f"params[{name!r}] must be a non-empty list of values, got {values!r}")
    combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    try:  # a parameter the world does not take: say so here, not in a worker process
        signature: inspect.Signature | None = inspect.signature(world)
    except (TypeError, ValueError):  # a builtin or a C function: nothing to check
        signature = None
    for combo in combos:
        try:
            if signature is not None:
                signature.bind(None, **combo)
        except TypeError as exc:
            raise UserError(f"sweep(): the world cannot take {sorted(combo)}: {exc}") from None
    jobs = [(world, seed, combo, until, rows, options) for combo in combos for seed in seed_list]
    workers = processes if processes is not None else (os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UserError(f"processes must be a positive int, got {processes!r}")
    if workers == 1 or len(jobs) == 1:
        outcomes = [_attempt(job) for job in jobs]
    else:
        try:
            pickle.dumps(world)
        except Exception as exc:
            raise UserError(
                f"sweep() sends the world function to other processes, and {world!r} cannot be "
                f"pickled ({exc}); define it at module level"
            ) from None
        outcomes = _run_in_processes(jobs, min(workers, len(jobs)))
    failures = [
        SweepFailure(seed=job[1], params=dict(job[2]), error=out[1], traceback=out[2])
        for job, out in zip(jobs, outcomes, strict=True)
        if out[0] != "ok"
    ]
    results = [out[1] for out in outcomes if out[0] == "ok"]
    flat = [row for result in results for row in result]
    columns: list[str] = ["seed", *grid]
    for row in flat:
        columns.extend(name for name in row if name not in columns)
    table = Table(columns, flat)
    if failures:
        raise SweepError(_failed(failures, len(jobs)), failures=failures, table=table)
    return table
