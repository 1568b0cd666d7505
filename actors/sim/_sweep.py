"""`sweep`: one simulation per seed and parameter combination, in parallel processes."""

from __future__ import annotations

import concurrent.futures
import gc
import inspect
import itertools
import multiprocessing
import os
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from actors.exceptions import UserError
from actors.sim._settings import settings_of
from actors.sim._simulation import Simulation
from actors.sim._table import Table

__all__ = ["run_one", "sweep"]

World = Callable[..., Any]
"""Builds a world onto a simulation: ``world(sim, **params)``."""


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
        results = [run_one(*job) for job in jobs]
    else:
        try:
            pickle.dumps(world)
        except Exception as exc:
            raise UserError(
                f"sweep() sends the world function to other processes, and {world!r} cannot be "
                f"pickled ({exc}); define it at module level"
            ) from None
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            max_workers=min(workers, len(jobs)), mp_context=context
        ) as pool:
            results = list(pool.map(run_one, *zip(*jobs, strict=True)))
    flat = [row for result in results for row in result]
    columns: list[str] = ["seed", *grid]
    for row in flat:
        columns.extend(name for name in row if name not in columns)
    return Table(columns, flat)
