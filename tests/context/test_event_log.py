"""The log keeps records and makes `Event`s when they are read: readers must not tell."""

from __future__ import annotations

import copy
import pickle

from actors import Agent, AgentContext, Event, UserMessage
from actors.context._event_log import EventView
from actors.testing import ScriptedModel, SyncDriver


def test_every_read_of_an_event_gives_the_same_object() -> None:
    ctx = AgentContext()
    ctx._record("turn_start", {"run_id": "r1"})
    returned = ctx.add_message(UserMessage(content="hi"))
    ctx._record("turn_end", {"run_id": "r1", "reason": "completed"})
    events = ctx.events
    assert all(type(e) is Event for e in events)
    assert [e.seq for e in events] == [0, 1, 2]
    assert events[1] is returned
    assert ctx.events[0] is events[0]
    assert ctx.events_since(1) == events[1:]
    assert ctx.events_since(-1) == events[-1:]


def test_a_subscriber_gets_each_event_as_it_is_appended() -> None:
    ctx = AgentContext()
    seen: list[Event] = []
    ctx.subscribe(seen.append)
    ctx._record("turn_start", {"run_id": "r1"})
    ctx.add_message(UserMessage(content="hi"))
    assert [e.type for e in seen] == ["turn_start", "user_message"]
    assert all(a is b for a, b in zip(seen, ctx.events, strict=True))


def test_a_runs_events_are_a_view_equal_to_a_tuple_that_later_runs_do_not_change() -> None:
    driver = SyncDriver(Agent("a", model=ScriptedModel(["one", "two"])))
    first = driver.run("go")
    assert isinstance(first.events, EventView)
    kinds = [e.type for e in first.events]
    assert kinds[0] == "turn_start"
    assert kinds[-1] == "turn_end"
    frozen = tuple(first.events)
    driver.run("again")
    assert first.events == frozen  # the second run's events do not show in the first's
    assert len(first.events) == len(frozen)
    assert first.events[-1] is frozen[-1]
    assert first.events[1:3] == frozen[1:3]
    assert tuple(driver.context.events[: len(frozen)]) == frozen
    assert pickle.loads(pickle.dumps(first.events)) == frozen
    assert type(pickle.loads(pickle.dumps(first.events))) is tuple
    assert copy.deepcopy(first.events) == frozen


def test_a_rebuilt_context_equals_the_live_one_whatever_was_read() -> None:
    driver = SyncDriver(Agent("a", model=ScriptedModel(["one", "two"])))
    driver.run("go")
    driver.run("again")
    ctx = driver.context
    rebuilt = AgentContext.deserialize(ctx.serialize())
    assert rebuilt.events == ctx.events
    assert rebuilt.messages == ctx.messages
    assert rebuilt.usage == ctx.usage


def test_a_subscriber_or_tracer_that_comes_late_sees_every_event_from_then_on() -> None:
    from typing import Any

    from actors.host._observer import set_tree_observer
    from actors.sim import Simulation

    class Tracer:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_event(self, node: Any, event: Event) -> None:
            self.seen.append(event.type)

        def on_restore(self, node: Any, events: Any) -> None:
            pass

        def on_release(self, node: Any, how: str) -> None:
            pass

    sim = Simulation(seed=1, record_events=False)
    ref = sim.spawn(Agent("a", model=ScriptedModel(["one", "two", "three", "four"])))
    ref.run("go")  # nothing takes its events: they stay records
    seen: list[Event] = []
    unsubscribe = ref.subscribe(seen.append)
    ref.run("again")
    kinds = [e.type for e in seen]
    assert kinds[0] == "turn_start"
    assert kinds[-1] == "turn_end"
    assert tuple(seen) == ref.context().events[len(ref.context().events) - len(seen) :]
    unsubscribe()
    count = len(seen)
    tracer = Tracer()
    previous = set_tree_observer(tracer)
    try:
        ref.run("third")
    finally:
        set_tree_observer(previous)
    assert len(seen) == count  # unsubscribed: nothing more
    assert tracer.seen[0] == "turn_start"
    assert tracer.seen[-1] == "turn_end"
    ref.run("fourth")  # the tracer is gone: nothing more for it either
    assert tracer.seen.count("turn_start") == 1


def test_a_view_adds_to_a_tuple_on_either_side() -> None:
    driver = SyncDriver(Agent("a", model=ScriptedModel(["one"])))
    events = driver.run("go").events
    first = (events[0],)
    assert first + events == (events[0], *events)
    assert events + first == (*events, events[0])
