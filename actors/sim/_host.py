"""`SimHost`: the inline host with a virtual clock, seeded randomness and a world's events.

It is `InlineHost` (agents on the calling thread, one queue ordered by (time, sequence)) with
durations: a model's reply arrives after its latency, a tool's result after its duration, a
peer message after its delay, a child's deadline and a run's deadline at their time. The
clock never waits: when nothing is runnable now it jumps to the next scheduled thing. Event
timestamps are read from it, and every random draw (latencies, durations) comes from one
generator seeded by the simulation, in the one order the queue gives, so a seed gives the same
bytes in any process.
"""

from __future__ import annotations

import functools
import inspect
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from gc import get_count as gc_count
from typing import Any, SupportsIndex, overload

from actors.context._event_log import event_at
from actors.context._events import Event
from actors.context._run_context import with_delegator
from actors.exceptions import AgentStoppedError, UserError
from actors.host import (
    AgentCell,
    AgentNode,
    Ask,
    DelegateDone,
    DelegateReply,
    ExpireRun,
    InlineHost,
    ParentReply,
    inline_reply,
)
from actors.loop._agent import Agent
from actors.loop._loop import TreeLimits
from actors.loop._outcome import outcome_of_error
from actors.loop._types import (
    CallModel,
    CallTool,
    ModelReplied,
    SendMessage,
    ToolFinished,
)
from actors.models._model import Model, ModelResponse
from actors.sim import _collector
from actors.sim._collector import quiet_collector
from actors.sim._inflight import InFlight, Issuer, RateLimit

_gc = _collector.state

__all__ = ["Duration", "EventLog", "SimHost", "WorldCall"]

Duration = float | Mapping[str, float] | Callable[[str, Mapping[str, Any], random.Random], float]
"""How long a tool call takes in virtual seconds: one number, a number per tool name, or a
function of the tool's name, its arguments and the simulation's random source."""

Delay = float | Callable[[str, str, random.Random], float]
"""How long a peer message travels: seconds, or a function of (sender, receiver, rng)."""


@dataclass(eq=False, slots=True)
class WorldCall:
    """A function of the world to call at a time (every ``period`` seconds, if given)."""

    function: Callable[[], Any]
    period: float | None = None
    name: str = ""
    cancelled: bool = False  # a recurring call that is no longer wanted


class EventLog(list[Any]):
    """Every event of a simulation's agents, in the order they were appended.

    Read as ``(agent_id, event)`` pairs. Each agent's context notes its events here as
    ``(agent_id, items, seq)`` (`AgentContext._set_tap`): no `Event` is made for the log while the
    simulation runs, only when the log is read (an export, `Simulation.events`). A pair
    appended as it is reads as itself.
    """

    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[str, Event]]:
        for entry in list.__iter__(self):
            yield entry if len(entry) == 2 else (entry[0], event_at(entry[1], entry[2]))

    @overload
    def __getitem__(self, index: SupportsIndex) -> tuple[str, Event]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, Event]]: ...

    def __getitem__(
        self, index: SupportsIndex | slice
    ) -> tuple[str, Event] | list[tuple[str, Event]]:
        if isinstance(index, slice):
            return list(EventLog(list.__getitem__(self, index)))
        entry = list.__getitem__(self, index)
        return entry if len(entry) == 2 else (entry[0], event_at(entry[1], entry[2]))


_NUMBERS = (int, float)


def _seconds(value: object, what: str) -> float:
    if type(value) is float and value >= 0:
        return value  # the common case, checked first (a model's latency, every step)
    if isinstance(value, bool) or not isinstance(value, _NUMBERS) or value < 0:
        raise UserError(f"{what} must be seconds (a number >= 0), got {value!r}")
    return float(value)


class SimHost(InlineHost):
    """An `InlineHost` whose effects take virtual time.

    Args:
        seed: Seeds the random source of latencies and durations.
        start: The datetime of virtual time 0 (event timestamps are ``start + now``).
        limits: Tree limits.
        default_model: The model of specs that name none.
        tool_duration: How long tool calls take.
        message_delay: How long peer messages travel.
        record: Keep every event of every agent, in delivery order (for exports).
        max_in_flight: Model requests (and concurrent tools) running at once.
        rate_limits: Wall-time limits on starting requests, by model name.
        concurrent_tools: Run tools (all, or these by name) off the thread, concurrently.
    """

    def __init__(
        self,
        *,
        seed: int | str,
        start: datetime,
        limits: TreeLimits | None,
        default_model: Model | None,
        tool_duration: Duration,
        message_delay: Delay,
        record: bool,
        max_in_flight: int = 64,
        rate_limits: Mapping[str, RateLimit] | None = None,
        concurrent_tools: bool | frozenset[str] = False,
    ) -> None:
        # Every event reads the clock: the stamp of the virtual now is kept ready (moved with
        # the time, in `_advance`) and read without a Python call.
        self._stamp = start
        super().__init__(
            clock=functools.partial(getattr, self, "_stamp"),
            limits=limits,
            default_model=default_model,
        )
        self.start = start
        self.rng = random.Random(f"actors-sim:{seed}")
        self.tool_duration = tool_duration
        self.message_delay = message_delay
        self.record = record
        self.log = EventLog()
        self.horizon: float | None = None  # handle nothing scheduled after this time
        self.driving = 0  # nesting depth of drive(): blocking calls are refused inside
        self.steps = 0  # model requests answered (agent-steps)
        self.delivered = 0  # messages handled
        self._pending = 0  # queued items that are not recurring world calls
        self.on_tick: Callable[[], None] | None = None
        # Real work (HTTP models, chosen tools) runs off this thread; the queue waits for it.
        self.issuer = Issuer(max_in_flight, rate_limits or {})
        self.concurrent_tools = concurrent_tools
        self.on_wait: Callable[[], None] | None = None  # called now and then while waiting

    # -- time -----------------------------------------------------------------------------------

    def stamp(self) -> datetime:
        """The datetime of the virtual now (every event's ``created_at``)."""
        return self._stamp

    def _advance(self, when: float) -> None:
        """Move the virtual clock forward to ``when``."""
        self.now = when
        self._stamp = self.start + timedelta(seconds=when)

    def schedule(self, when: float, call: WorldCall) -> None:
        """Call a function of the world at virtual time ``when``."""
        if call.period is None:
            self._pending += 1
        self._queue.push(when, "", call, self.now)

    # -- the queue ----------------------------------------------------------------------------

    def persist(self, node: AgentNode) -> None:
        """Nothing to write: a simulation's trees have no store (asked after every input)."""
        if node.tree.store is not None:  # pragma: no cover - no simulation makes one
            super().persist(node)

    def add(self, node: Any, context: Any) -> AgentCell:
        """Host a fresh agent; its events join the simulation's log as they are appended."""
        if self.record:
            context._set_tap(self.log, node.agent_id)
        return super().add(node, context)

    def tell(self, agent_id: str, message: Any, delay: float = 0.0) -> None:
        """Queue a message for an agent, ``delay`` virtual seconds from now."""
        # Nearly every message: queued here, as `schedule` queues world calls.
        if not isinstance(message, DelegateDone):
            self._queue.push(self.now + delay, agent_id, message, self.now)
            self._pending += 1
            return
        queued = len(self._queue)
        super().tell(agent_id, message, delay)  # may hand it to its parent's turn at once
        if len(self._queue) > queued:
            self._pending += 1

    def drive(self, until: Callable[[], bool] | None, horizon: float | None) -> None:
        """Handle what is queued, in order, until ``until()`` holds or nothing is left.

        With a ``horizon``, nothing scheduled after it is handled and the clock ends there
        (recurring world calls go on until it); without one, the drive ends when only
        recurring world calls are left.
        """
        outer = self.horizon
        self.horizon = horizon if outer is None or horizon is None else min(horizon, outer)
        self.driving += 1
        try:
            with quiet_collector():  # see actors.sim._collector: a third of the time otherwise
                self.pump(until)
        finally:
            self.driving -= 1
            reached = self.horizon
            self.horizon = outer
        if (
            reached is not None
            and (until is None or not until())
            and self.now < reached
            and ((first := self._queue.first_time()) is None or first > reached)
        ):
            self._advance(reached)

    def _next(self) -> tuple[str, Any] | None:
        if gc_count()[0] >= _gc.every or _gc.due:
            _collector.set_aside()
        if self._held and (ready := self._take_held()) is not None:
            if type(ready[1]) is InFlight:
                return ready[0], ready[1].wait(self.on_wait)
            return ready
        queue = self._queue
        while True:
            horizon = self.horizon
            if horizon is None:
                if self._pending == 0:
                    return None  # only recurring world calls: nothing will ever happen
            else:
                first = queue.first_time()
                if first is None or first > horizon:
                    return None
            item = queue.pop()
            if item is None:
                return None
            when, _, agent_id, message = item
            if type(message) is WorldCall:
                if message.period is None:
                    self._pending -= 1
                elif message.cancelled:
                    continue
                if when > self.now:
                    self._advance(when)
                self._call_world(message)
                continue
            self._pending -= 1
            if type(message) is ExpireRun and self._stale(agent_id, message):
                continue  # the run ended before its deadline: the clock does not move for it
            if when > self.now:
                self._advance(when)
            if agent_id in self._busy:
                self._held.append((agent_id, message))
                continue
            self.delivered += 1
            if type(message) is InFlight:  # a real request: its reply, once it is back
                return agent_id, message.wait(self.on_wait)
            return agent_id, message
        return None

    def _stale(self, agent_id: str, message: ExpireRun) -> bool:
        cell = self.cells.get(agent_id)
        return cell is None or not any(w is message.reply for w in cell.waiting)

    def _call_world(self, call: WorldCall) -> None:
        if gc_count()[0] >= _gc.every or _gc.due:
            _collector.set_aside()
        if call.period is not None:
            self._queue.push(self.now + call.period, "", call, self.now)
        call.function()
        if self.on_tick is not None:
            self.on_tick()

    # -- effects on virtual time -------------------------------------------------------------

    def call_model(self, cell: AgentCell, effect: CallModel) -> None:
        """Answer now; the reply arrives after the model's latency (or its timeout)."""
        agent_id = cell.node.agent_id
        model = effect.model or cell.loop.model  # a summarizer's, or the agent's own
        self.steps += 1
        latency_for = getattr(model, "latency_for", None)
        try:
            delay = (
                _seconds(latency_for(effect.request, self.rng), "a latency") if latency_for else 0.0
            )
        except Exception as exc:
            self.tell(agent_id, ModelReplied(effect.run_id, effect.step, error=exc))
            return
        timeout = effect.timeout
        if timeout is not None and delay > timeout:
            error = TimeoutError(f"model request timed out after {timeout:g} s")
            self.tell(agent_id, ModelReplied(effect.run_id, effect.step, error=error), timeout)
            return
        self.tell(agent_id, self._reply_now(cell, effect), delay)

    def _reply_now(self, cell: AgentCell, effect: CallModel) -> ModelReplied | InFlight:
        """The reply, computed now; or, for work that waits (HTTP), the request in flight."""
        model = effect.model or cell.loop.model
        respond = getattr(model, "respond_untimed", None)
        if respond is None:
            inline = inline_reply(model, effect)  # an InlineModel answers on this thread
            return inline if inline is not None else self.issuer.request(model, effect, None)
        try:
            response = respond(effect.request)
            if type(response) is not ModelResponse and inspect.isawaitable(response):
                return self.issuer.request(model, effect, response)
        except Exception as exc:
            return ModelReplied(effect.run_id, effect.step, error=exc)
        return ModelReplied(effect.run_id, effect.step, response=response)

    def call_tool(self, cell: AgentCell, effect: CallTool) -> None:
        """Run the tool now; its result arrives after its duration (or its timeout)."""
        agent_id = cell.node.agent_id
        try:
            duration = self._duration(effect)
        except Exception as exc:
            self.tell(agent_id, ToolFinished(effect.run_id, effect.call.id, outcome_of_error(exc)))
            return
        timeout = effect.timeout
        if timeout is not None and duration > timeout:
            # It would still be running at its deadline: it never ran, as far as the world
            # knows (a deterministic stand-in for a thread abandoned at its timeout).
            outcome = outcome_of_error(TimeoutError(), timeout)
            self.tell(agent_id, ToolFinished(effect.run_id, effect.call.id, outcome), timeout)
            return
        concurrent = self.concurrent_tools
        if concurrent and (concurrent is True or effect.call.name in concurrent):
            self.tell(agent_id, self._start_tool(effect), duration)
            return
        self.tell(agent_id, self.tool_outcome(cell, effect), duration)

    def _start_tool(self, effect: CallTool) -> InFlight:
        # Off this thread, a tool cannot run a child on it: delegation is refused plainly.
        ctx = with_delegator(effect.ctx, _no_delegation)
        issuer = self.issuer
        run_id, call_id = effect.run_id, effect.call.id
        future = issuer.submit(issuer.tool(effect, ctx))
        return InFlight(
            future, lambda error: ToolFinished(run_id, call_id, outcome_of_error(error))
        )

    def _duration(self, effect: CallTool) -> float:
        spec = self.tool_duration
        name = effect.call.name
        if callable(spec):
            return _seconds(spec(name, effect.arguments, self.rng), "a tool duration")
        if isinstance(spec, Mapping):
            return _seconds(spec.get(name, 0.0), f"the duration of tool {name!r}")
        return spec

    def peer_delay(self, cell: AgentCell, effect: SendMessage) -> float:
        """How long this message travels (the simulation's ``message_delay``)."""
        delay = self.message_delay
        if callable(delay):
            return _seconds(delay(cell.node.agent_id, effect.to, self.rng), "a message delay")
        return delay

    # -- children's deadlines ------------------------------------------------------------

    def arm_deadline(self, child: AgentNode, reply: ParentReply | DelegateReply, t: float) -> None:
        """The child's run is cancelled at its deadline on the virtual clock, if still running."""
        self.tell(child.agent_id, ExpireRun(reply, t), t)

    # -- what refs ask ----------------------------------------------------------------------------

    where = "in this simulation"

    def send(self, agent_id: str, message: Any, incarnation: str | None = None) -> None:
        """Queue a message for a live agent (a ref's run, resume, steer or cancel)."""
        self.live(agent_id)
        self.tell(agent_id, message)

    def ask(
        self, agent_id: str, message: Any, timeout: float = 0.0, incarnation: str | None = None
    ) -> Any:
        """Answer a question (a `Query`) from the agent's state now."""
        cell = self.cells.get(agent_id)
        if cell is None:
            raise AgentStoppedError(f"agent {agent_id!r} is not in this simulation")
        if isinstance(message, Ask):
            message = message.message
        return cell.receive(message)

    def status_of(self, agent_id: str, tree: Any = None) -> str:
        """The agent's status (``stopped`` for an id this simulation does not hold)."""
        cell = self.cells.get(agent_id)
        return cell.node.status if cell is not None else "stopped"

    def stop_agent(self, agent_id: str) -> None:
        """Stop an agent and its descendants (a run in progress fails)."""
        cell = self.cells.get(agent_id)
        if cell is None or cell.node.status == "stopped":
            return
        cell.release("stopped")
        cell.node.status = "stopped"
        for child in list(cell.node.children):
            self.stop_agent(child)


def _no_delegation(agent: Agent[Any], task: str, /, *, timeout: float) -> Any:
    raise UserError(
        "a tool that runs concurrently in a Simulation (concurrent_tools) cannot delegate: "
        "leave it out of concurrent_tools so that it runs on the simulation's thread"
    )
