"""`Simulation`: many agents and a world on one thread, on a virtual clock, from one seed."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from actors._files import replacing
from actors._text import clean_json, is_clean
from actors.context._events import Event
from actors.exceptions import UserError
from actors.host import new_root
from actors.loop._agent import Agent
from actors.loop._budget import Budget, check_budget
from actors.loop._loop import TreeLimits
from actors.models._model import Model
from actors.models._test_models import seed_call_ids
from actors.sim._fork import KEEP, copy_trees
from actors.sim._host import Delay, Duration, SimHost, WorldCall
from actors.sim._inflight import RateLimit, RequestStats
from actors.sim._ref import SimRef
from actors.sim._settings import SimulationSettings, settings_of
from actors.sim._table import Table

__all__ = ["EPOCH", "Simulation"]

OutputT = TypeVar("OutputT")

EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
"""Virtual time 0 of a simulation, unless it is given another ``start``."""


def _time(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise UserError(f"{what} must be a number of virtual seconds, got {value!r}")
    return float(value)


class Simulation:
    """A deterministic host: agents and a world on one thread, on a virtual clock.

    The same agent loop as `Runtime` runs here, with every effect on virtual time: a model's
    reply arrives after its latency (``ScriptedModel(latency=...)``), a tool's result after
    its duration, a peer message after its delay, and a deadline at its time. When nothing is
    runnable the clock jumps to the next scheduled thing, so a simulated day takes as long as
    the work in it. Deliveries are ordered by (virtual time, sequence); event timestamps come
    from the clock, tool-call ids of `actors.testing.call` and every random draw from the
    seed: the same world and seed give the same event log, byte for byte, in any process.

    The world is plain Python that tools reach through ``tool_context``; the simulation calls
    it at times (`at`, `every`), samples series from it (`collect`) and exports what happened
    (`rows`, `export_jsonl`).

    Args:
        seed: The seed of every random choice (an int or a str).
        start: The datetime of virtual time 0.
        limits: Limits against runaway agent trees.
        default_model: The model of agents whose spec names none.
        tool_duration: Virtual seconds a tool call takes: a number, a mapping of tool names to
            numbers, or a function ``(tool_name, arguments, rng) -> seconds``.
        message_delay: Virtual seconds a peer message travels: a number or a function
            ``(sender_id, receiver_id, rng) -> seconds``.
        record_events: Keep every event of every agent in delivery order (`events`,
            `export_jsonl`). Turn it off for the largest runs.
        max_in_flight: Real model requests (models that answer over HTTP, not scripted
            ones) run concurrently, up to this many at once; their replies are applied in
            (virtual time, sequence) order, so the log does not depend on when they came back.
        rate_limits: `RateLimit` by model name (``model.name``): how fast requests to that
            model may start, on wall time. They slow a run down, never change its log.
        concurrent_tools: Run tools concurrently too, off the simulation's thread (async ones
            on the requests' event loop, blocking ones on a pool of threads): True for every
            tool, or a collection of tool names. Only for tools that touch nothing the
            simulation changes meanwhile (a service, a file of their own): they see the world
            at wall times no seed controls. Their durations stay virtual (``tool_duration``).

    Example:
        >>> from actors import Agent
        >>> from actors.testing import ScriptedModel
        >>> sim = Simulation(seed=1)
        >>> ref = sim.spawn(Agent("a", model=ScriptedModel(["hi"], latency=2.0)))
        >>> ref.run("hello").output, sim.now
        ('hi', 2.0)
    """

    def __init__(
        self,
        *,
        seed: int | str = 0,
        start: datetime = EPOCH,
        limits: TreeLimits | None = None,
        default_model: Model | None = None,
        tool_duration: Duration = 0.0,
        message_delay: Delay = 0.0,
        record_events: bool = True,
        max_in_flight: int = 64,
        rate_limits: Mapping[str, RateLimit] | None = None,
        concurrent_tools: bool | Collection[str] = False,
    ) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int | str):
            raise UserError(f"Simulation(seed=...) takes an int or a str, got {seed!r}")
        if not isinstance(start, datetime) or start.tzinfo is None:
            raise UserError(f"Simulation(start=...) takes an aware datetime, got {start!r}")
        if isinstance(tool_duration, Mapping):
            for name, seconds in tool_duration.items():
                if _time(seconds, f"tool_duration[{name!r}]") < 0:
                    raise UserError(f"tool_duration[{name!r}] cannot be negative")
            tool_duration = dict(tool_duration)
        elif not callable(tool_duration):
            tool_duration = _time(tool_duration, "tool_duration")
            if tool_duration < 0:
                raise UserError("tool_duration cannot be negative")
        if not callable(message_delay):
            message_delay = _time(message_delay, "message_delay")
            if message_delay < 0:
                raise UserError("message_delay cannot be negative")
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int):
            raise UserError(f"Simulation(max_in_flight=...) takes an int, got {max_in_flight!r}")
        if max_in_flight < 1:
            raise UserError(
                f"Simulation(max_in_flight=...) must be at least 1, got {max_in_flight}"
            )
        limits_by_model = _rate_limits(rate_limits)
        self.seed = seed
        self.settings = SimulationSettings(
            start=start,
            limits=limits,
            default_model=default_model,
            tool_duration=tool_duration,
            message_delay=message_delay,
            record_events=record_events,
            max_in_flight=max_in_flight,
            rate_limits=rate_limits,
            concurrent_tools=concurrent_tools,
        )
        """The settings this simulation was made with (all but the seed)."""
        self.rng = random.Random(f"actors-world:{seed}")
        self._host = SimHost(
            seed=seed,
            start=start,
            limits=limits,
            default_model=default_model,
            tool_duration=tool_duration,
            message_delay=message_delay,
            record=record_events,
            max_in_flight=max_in_flight,
            rate_limits=limits_by_model,
            concurrent_tools=_tool_names(concurrent_tools),
        )
        self._counters: dict[str, int] = {}
        self._samples: dict[float, dict[str, Any]] = {}
        self._series: list[str] = []
        # Scripts built from here on get tool-call ids from this seed.
        seed_call_ids(seed)

    @classmethod
    def for_world(
        cls,
        world: Callable[..., Any],
        *,
        seed: int | str = 0,
        settings: SimulationSettings | None = None,
        **overrides: Any,
    ) -> Simulation:
        """The simulation ``world`` declared: its `SimulationSettings`, with ``overrides``.

        ``actors simulate MODULE:WORLD`` and `sweep` make their simulations with this, so a
        world run from Python this way gives the same log as from the command line. It does
        not call the world: ``world(sim, **params)`` is yours to call (it may return state).

        Args:
            world: The world function (settings declared with `SimulationSettings` as its
                decorator; none declared: the defaults).
            seed: The seed.
            settings: Settings to use instead of the world's.
            **overrides: Settings that override them (``message_delay=...``, ...).

        Raises:
            UserError: An override that is not a setting, or a bad value.

        Example:
            >>> @SimulationSettings(message_delay=2.0)
            ... def world(sim: Simulation) -> None: ...
            >>> Simulation.for_world(world, seed=1).settings.message_delay
            2.0
        """
        chosen = settings if settings is not None else settings_of(world)
        return cls(seed=seed, **chosen.replace(**overrides).options())

    # -- time -------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The virtual time, in seconds since the start."""
        return self._host.now

    @property
    def time(self) -> datetime:
        """The virtual time as a datetime (``start + now``)."""
        return self._host.stamp()

    # -- agents -----------------------------------------------------------------------------

    def spawn(
        self,
        agent: Agent[OutputT],
        *,
        agent_id: str | None = None,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        budget: Budget | None = None,
    ) -> SimRef[OutputT]:
        """Start a root agent; returns its handle (the `AgentRef` API, on virtual time).

        Args:
            agent: The spec.
            agent_id: Its id; by default the spec's name, then ``name-2``, ``name-3``...
            tool_context: The static channel (the world, typically).
            metadata: The initial metadata (plain JSON).
            budget: What the agent and its descendants may spend together (see `Budget`).

        Raises:
            UserError: the id is taken, or the arguments cannot be used.
        """
        if not isinstance(agent, Agent):
            raise UserError(f"spawn() takes an Agent spec, got {type(agent).__name__}")
        agent_id = self._unique_id(agent.name if agent_id is None else agent_id, agent_id)
        host = self._host
        node, context = new_root(
            agent_id, agent, metadata, tool_context, host.stamp, budget=check_budget(budget)
        )
        host.add(node, context)
        return SimRef._new(host, agent_id, name=agent.name, tree=node.tree)  # type: ignore[arg-type]

    def fork(
        self, *, seed: int | str | None = None, tool_context: Any = KEEP, **settings: Any
    ) -> Simulation:
        """A new simulation holding this one's agents as they are now, at this virtual time.

        Each root tree is brought up there as `Runtime.fork` brings a fork up: from its logs,
        without one model request or tool call; a request or call in flight now (its reply
        due later on the virtual clock) is decided as after a crash (not started, or outcome
        unknown), open requests stay open. This simulation is not changed. Run the fork with
        another seed or other settings for a what-if; it is reproducible like any simulation.

        The world's schedule (`at`, `every`, `collect`) is not carried over: schedule it on
        the fork again. Agent ids stay the same (the two simulations share nothing).

        Args:
            seed: The fork's seed (this one's by default).
            tool_context: The fork's world, for every root; by default a deep copy of each
                root's (so that the fork cannot change this simulation's world).
            **settings: Settings that replace this simulation's (``message_delay=...``).

        Raises:
            UserError: A setting that is not one, or a world that cannot be copied.
        """
        options = self.settings.replace(**settings).options()
        fork = Simulation(seed=self.seed if seed is None else seed, **options)
        fork._host._advance(self.now)
        copy_trees(self._host, fork._host, tool_context)
        fork._counters = dict(self._counters)
        return fork

    def _unique_id(self, wanted: str, explicit: str | None) -> str:
        if not isinstance(wanted, str) or not wanted:
            raise UserError(f"agent_id must be a non-empty str, got {wanted!r}")
        cells = self._host.cells
        if explicit is not None:
            if explicit in cells:
                raise UserError(f"agent id {explicit!r} is taken in this simulation")
            return explicit
        suffix = self._counters.get(wanted)
        if suffix is None and wanted not in cells:
            self._counters[wanted] = 2
            return wanted
        suffix = suffix or 2
        while (agent_id := f"{wanted}-{suffix}") in cells:
            suffix += 1
        self._counters[wanted] = suffix + 1
        return agent_id

    def ref(self, agent_id: str) -> SimRef[Any]:
        """The handle of an agent of this simulation (a root or a child), by id.

        Raises:
            AgentStoppedError: no agent of that id.
        """
        cell = self._host.live(agent_id)
        node = cell.node
        return SimRef._new(
            self._host,  # type: ignore[arg-type]
            agent_id,
            name=node.name,
            parent_id=node.parent_id,
            tree=node.tree,
        )

    @property
    def agent_ids(self) -> list[str]:
        """The ids of every agent of the simulation, in the order they started."""
        return list(self._host.cells)

    # -- the world --------------------------------------------------------------------------

    def at(self, time: float, function: Callable[[], Any]) -> None:
        """Call ``function()`` at virtual time ``time`` (now, if that is past)."""
        when = _time(time, "at(time)")
        if when == float("inf"):
            raise UserError("at(time) needs a finite virtual time, got inf")
        self._check_function(function)
        self._host.schedule(max(when, self.now), WorldCall(function))

    def after(self, delay: float, function: Callable[[], Any]) -> None:
        """Call ``function()`` ``delay`` virtual seconds from now."""
        seconds = _time(delay, "after(delay)")
        if seconds < 0:
            raise UserError(f"after() needs a delay >= 0, got {delay!r}")
        self.at(self.now + seconds, function)

    def every(
        self, period: float, function: Callable[[], Any], *, start: float | None = None
    ) -> None:
        """Call ``function()`` every ``period`` virtual seconds, from ``start`` (now).

        Recurring calls keep the simulation going only until `run`'s ``until``: without one,
        a run ends when nothing but recurring calls is left.
        """
        seconds = _time(period, "every(period)")
        if seconds <= 0:
            raise UserError(f"every() needs a period > 0, got {period!r}")
        self._check_function(function)
        first = self.now if start is None else max(_time(start, "every(start=)"), self.now)
        self._host.schedule(first, WorldCall(function, seconds))

    def collect(self, name: str, function: Callable[[], Any], *, every: float = 1.0) -> None:
        """Sample ``function()`` every ``every`` virtual seconds into the column ``name``.

        The samples become `rows`: one row per sampling time, a ``time`` column first.
        """
        if not isinstance(name, str) or not name or name == "time":
            raise UserError(f"a series needs a name other than 'time', got {name!r}")
        if name in self._series:
            raise UserError(f"a series named {name!r} is collected already")
        self._check_function(function)
        self._series.append(name)
        samples = self._samples

        def sample() -> None:
            samples.setdefault(self.now, {})[name] = function()

        self.every(every, sample)

    @staticmethod
    def _check_function(function: object) -> None:
        if not callable(function):
            raise UserError(f"expected a function to call, got {function!r}")

    # -- running ----------------------------------------------------------------------------

    def run(
        self,
        until: float | None = None,
        *,
        progress: Callable[[float], None] | None = None,
    ) -> float:
        """Run the simulation; returns the virtual time it stopped at.

        Args:
            until: Stop at this virtual time (recurring calls and samples go on until it).
                None: run until nothing but recurring calls is left.
            progress: Called with the virtual time now and then (a progress bar).

        Raises:
            UserError: ``until`` is in the past, or the call comes from inside the simulation.
        """
        host = self._host
        if host.driving:
            raise UserError("run() cannot be called from inside the simulation (a world event)")
        horizon = None if until is None else _time(until, "run(until=...)")
        if horizon is not None and horizon < self.now:
            raise UserError(f"run(until={until!r}) is before now ({self.now:g})")
        host.on_tick = None if progress is None else (lambda: progress(host.now))
        host.on_wait = host.on_tick  # while waiting for real replies, on wall time
        ticker = None
        if progress is not None and horizon is not None and horizon > self.now:
            step = (horizon - self.now) / 100
            ticker = WorldCall(lambda: None, step, "progress")
            host.schedule(self.now + step, ticker)
        try:
            host.drive(None, horizon)
        finally:
            # HTTP clients are closed between runs, so none is left open at exit; requests
            # still in flight past ``until`` are waited for first (a next run needs them).
            host.issuer.close_clients()
            host.on_tick = host.on_wait = None
            if ticker is not None:
                ticker.cancelled = True
            if progress is not None:
                progress(host.now)
        return host.now

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every agent of the simulation (its log and rows stay readable); idempotent.

        Args:
            timeout: Unused (nothing here runs on another thread); as for `Runtime.shutdown`.
        """
        host = self._host
        for agent_id in list(host.cells):
            cell = host.cells[agent_id]
            if cell.node.parent_id is None:
                host.stop_agent(agent_id)

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- what happened ----------------------------------------------------------------------

    @property
    def steps(self) -> int:
        """Agent-steps so far: model requests answered (each with its tool calls)."""
        return self._host.steps

    @property
    def requests(self) -> RequestStats:
        """Real model requests so far: in flight, done, failed, and the tokens of replies.

        Scripted models (``actors.testing``) answer at once and are not counted here.
        """
        return self._host.issuer.stats()

    @property
    def deliveries(self) -> int:
        """Messages handled by agents so far."""
        return self._host.delivered

    @property
    def events(self) -> list[tuple[str, Event]]:
        """Every event of every agent as ``(agent_id, event)``, in delivery order."""
        return list(self._host.log)

    def rows(self) -> Table:
        """The collected series: a ``time`` column, then one column per `collect`."""
        rows = [{"time": when, **values} for when, values in sorted(self._samples.items())]
        return Table(["time", *self._series], rows)

    def export_jsonl(self, path: str | Path | IO[str]) -> int:
        """Write the whole event log, one JSON event a line, in delivery order.

        Each line holds ``agent_id``, ``seq``, ``type``, ``created_at`` and ``data``, keys
        sorted: the same world and seed give the same bytes. Returns the number of lines.
        A message's parts (images, audio, documents) are written inline, their base64 in
        ``data``: the file stands alone.
        A file is written under a temporary name and renamed when complete, so a failure
        never leaves a partial file; text follows the text rule (a lone surrogate, which only
        a log of an older version can hold, is written as U+FFFD).

        Raises:
            UserError: the simulation was made with ``record_events=False``.
        """
        if not self._host.record:
            raise UserError("this simulation keeps no event log (record_events=False)")
        if isinstance(path, str | Path):
            with replacing(path) as out:
                return self._write_jsonl(out)
        return self._write_jsonl(path)

    def _write_jsonl(self, out: IO[str]) -> int:
        dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
        for agent_id, event in self._host.log:
            line = {
                "agent_id": agent_id,
                "seq": event.seq,
                "type": event.type,
                "created_at": event.created_at.isoformat(),
                "data": event.data,
            }
            text = dumps(line)
            if not is_clean(text):
                text = dumps(clean_json(line))
            out.write(text)
            out.write("\n")
        return len(self._host.log)

    def summary(self) -> dict[str, Any]:
        """Counts of what happened: time, agents, steps, deliveries, events, by event type."""
        by_type: dict[str, int] = {}
        for _, event in self._host.log:
            by_type[event.type] = by_type.get(event.type, 0) + 1
        return {
            "seed": self.seed,
            "now": self.now,
            "agents": len(self._host.cells),
            "steps": self.steps,
            "deliveries": self.deliveries,
            "events": len(self._host.log),
            "event_types": dict(sorted(by_type.items())),
        }

    def __repr__(self) -> str:
        return (
            f"<Simulation seed={self.seed!r} now={self.now:g} agents={len(self._host.cells)} "
            f"steps={self.steps}>"
        )


def _rate_limits(value: object) -> dict[str, RateLimit]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(name, str) and isinstance(limit, RateLimit) for name, limit in value.items()
    ):
        raise UserError(
            "Simulation(rate_limits=...) takes a mapping of model names to RateLimit, "
            f"e.g. {{'openai:gpt-4o': RateLimit(requests_per_minute=500)}}; got {value!r}"
        )
    return dict(value)


def _tool_names(value: object) -> bool | frozenset[str]:
    if isinstance(value, bool):
        return value
    if (
        isinstance(value, str)
        or not isinstance(value, Collection)
        or not all(isinstance(name, str) for name in value)
    ):
        raise UserError(
            "Simulation(concurrent_tools=...) takes True, False or a collection of tool names, "
            f"got {value!r}"
        )
    return frozenset(value)
