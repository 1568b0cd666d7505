"""Simulations: many agents and a world on one thread, on a virtual clock, from one seed.

`Simulation` is a third host of the same agent loop as `Runtime`: deliveries are ordered by
(virtual time, sequence), model latencies, tool durations, message delays and deadlines run
on a virtual clock that jumps to the next scheduled thing, and ids, timestamps and random draws
come from the seed, so the same world and seed give the same event log, byte for byte. A world
is plain Python reached by tools through ``tool_context``; `Simulation.at`, `Simulation.every`
and `Simulation.collect` schedule it and sample it; `sweep` runs many seeds and parameters in
parallel processes and returns one table. A world declares the settings it is made with
(`SimulationSettings` as its decorator), and `Simulation.for_world`, `sweep` and ``actors
simulate`` all use them.
"""

from actors.sim._inflight import RateLimit, RequestStats
from actors.sim._ref import SimRef, SimRunFuture
from actors.sim._settings import SimulationSettings
from actors.sim._simulation import EPOCH, Simulation
from actors.sim._sweep import SweepFailure, sweep
from actors.sim._table import Table

__all__ = [
    "EPOCH",
    "RateLimit",
    "RequestStats",
    "SimRef",
    "SimRunFuture",
    "Simulation",
    "SimulationSettings",
    "sweep",
    "SweepFailure",
    "Table",
]
