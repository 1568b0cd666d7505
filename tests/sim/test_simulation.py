"""The simulator as its users drive it: virtual time, the world, series, exports, bad input."""

from __future__ import annotations

import gc
import io
import json
import random
import threading
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from actors import Agent, ContextUpdate, ModelRequest, RunContext, Subagent
from actors.exceptions import AgentStoppedError, RunTimeoutError, UserError
from actors.sim import SimRef, Simulation, _collector
from actors.testing import FunctionModel, ScriptedModel, TestModel, call


def noted(ctx: RunContext[Any], text: str) -> str:
    """Note something.

    Args:
        text: What.
    """
    return f"noted {text}"


def tell(ctx: RunContext[Any], to: str, text: str) -> tuple[str, ContextUpdate]:
    """Tell another agent.

    Args:
        to: Its id.
        text: The message.
    """
    return "sent", ContextUpdate().send(to, text)


# -- the clock ------------------------------------------------------------------------------


def test_a_models_latency_moves_the_virtual_clock_and_stamps_the_events() -> None:
    start = datetime(2030, 5, 1, tzinfo=UTC)
    sim = Simulation(seed=3, start=start, tool_duration={"noted": 4.0})
    model = ScriptedModel([call("noted", text="x"), "ok"], latency=2.5)
    ref = sim.spawn(Agent("a", model=model, tools=[noted]))
    result = ref.run("go")
    assert result.output == "ok"
    assert sim.now == 2.5 + 4.0 + 2.5
    assert sim.time == start + timedelta(seconds=9.0)
    stamps = {e.type: e.created_at for e in result.events}
    assert stamps["turn_start"] == start
    assert stamps["tool_call"] == start + timedelta(seconds=2.5)
    assert stamps["tool_result"] == start + timedelta(seconds=6.5)


def test_a_latency_function_draws_from_the_seed() -> None:
    def latency(request: ModelRequest, rng: random.Random) -> float:
        return rng.uniform(1.0, 10.0)

    def elapsed(seed: int) -> float:
        sim = Simulation(seed=seed)
        sim.spawn(Agent("a", model=ScriptedModel(["x"], latency=latency))).run("go")
        return sim.now

    assert elapsed(1) == elapsed(1)
    assert elapsed(1) != elapsed(2)
    assert 1.0 <= elapsed(1) <= 10.0


def test_the_clock_jumps_to_the_next_thing_and_run_until_stops_there() -> None:
    sim = Simulation()
    seen: list[float] = []
    sim.at(100.0, lambda: seen.append(sim.now))
    sim.at(5.0, lambda: seen.append(sim.now))
    assert sim.run(until=50.0) == 50.0
    assert seen == [5.0]
    assert sim.run() == 100.0  # nothing recurring: runs until nothing is left
    assert seen == [5.0, 100.0]


def test_recurring_calls_run_until_the_horizon_only() -> None:
    sim = Simulation()
    ticks: list[float] = []
    sim.every(10.0, lambda: ticks.append(sim.now))
    sim.run(until=35.0)
    assert ticks == [0.0, 10.0, 20.0, 30.0]
    assert sim.run() == 35.0  # only recurring calls left: nothing more happens


def test_a_model_slower_than_its_timeout_fails_the_run_at_the_timeout() -> None:
    sim = Simulation()
    ref = sim.spawn(Agent("a", model=ScriptedModel(["x"], latency=90.0), model_timeout=30.0))
    with pytest.raises(Exception, match="timed out after 30 s"):
        ref.run("go")
    assert sim.now == 30.0


def test_a_tool_longer_than_its_timeout_never_runs_and_times_out() -> None:
    ran: list[str] = []

    def slow(ctx: RunContext[Any]) -> str:
        """Slow."""
        ran.append("yes")
        return "done"

    sim = Simulation(tool_duration=lambda name, args, rng: 100.0)
    model = ScriptedModel([call("slow"), "gave up"])
    ref = sim.spawn(Agent("a", model=model, tools=[slow], tool_timeout=20.0))
    result = ref.run("go")
    assert result.messages[-2].content == "Tool timed out after 20 s"
    assert ran == []
    assert sim.now == 20.0


def test_a_subagent_deadline_runs_on_virtual_time() -> None:
    sleepy = Agent("sleepy", model=ScriptedModel(["late"], latency=500.0))
    boss = Agent(
        "boss",
        model=ScriptedModel([call("sleepy", task="wake"), "gave up"]),
        subagents=[Subagent(sleepy, timeout=30.0)],
    )
    sim = Simulation()
    result = sim.spawn(boss).run("go")
    assert "timed out after 30 s" in result.messages[-2].content
    assert sim.now == 30.0
    assert sim.run() == 500.0  # the abandoned reply still arrives (and is discarded)


def test_a_deadline_that_a_child_beat_does_not_move_the_clock() -> None:
    quick = Agent("quick", model=ScriptedModel(["done"], latency=1.0))
    boss = Agent(
        "boss",
        model=ScriptedModel([call("quick", task="go"), "ok"]),
        subagents=[Subagent(quick, timeout=500.0)],
    )
    sim = Simulation()
    assert sim.spawn(boss).run("go").output == "ok"
    assert sim.now == 1.0
    assert sim.run() == 1.0  # the deadline at 500 s is stale: dropped, the clock stays


def test_a_runs_deadline_is_virtual_and_cancels_the_run() -> None:
    sim = Simulation()
    ref = sim.spawn(Agent("a", model=ScriptedModel(["late"], latency=60.0)))
    with pytest.raises(RunTimeoutError, match="within 10 virtual s"):
        ref.run("go", timeout=10.0)
    assert sim.now == 10.0
    assert ref.status == "idle"


# -- refs -----------------------------------------------------------------------------------


def test_spawn_gives_an_agent_ref_with_the_runtime_api() -> None:
    from actors import AgentRef

    sim = Simulation()
    ref = sim.spawn(Agent("a", model=TestModel(text="hi")))
    assert isinstance(ref, AgentRef)
    assert isinstance(ref, SimRef)
    assert sim.spawn(Agent("a", model=TestModel())).agent_id == "a-2"
    assert ref.run("one").output == "hi"
    future = ref.run_async("two")
    assert not future.done()
    assert future.result().output == "hi"
    assert [m.content for m in ref.context().messages][-2:] == ["two", "hi"]
    assert ref.tree().agent_id == "a"
    events = list(ref.run_stream("three"))
    assert type(events[-1]).__name__ == "RunEnded"
    seen: list[str] = []
    stop = ref.subscribe(lambda event: seen.append(event.type))
    ref.run("four")
    stop()
    assert "turn_end" in seen
    ref.stop()
    assert ref.status == "stopped"
    with pytest.raises(AgentStoppedError):
        ref.run("five")


def test_blocking_calls_inside_the_simulation_are_refused_with_a_way_out() -> None:
    sim = Simulation()
    ref = sim.spawn(Agent("a", model=TestModel(text="hi")))
    errors: list[Exception] = []

    def world_event() -> None:
        try:
            ref.run("inside")
        except UserError as exc:
            errors.append(exc)
        ref.run_async("fine")

    sim.at(1.0, world_event)
    sim.run()
    assert "run_async()" in str(errors[0])
    assert ref.context().messages[-1].content == "hi"


# -- peers ----------------------------------------------------------------------------------


def test_a_peer_message_starts_a_turn_of_an_idle_receiver_or_waits_with_queue() -> None:
    sim = Simulation(message_delay=3.0)
    runner = sim.spawn(Agent("runner", model=ScriptedModel(["on it"], latency=1.0)))
    queued = sim.spawn(Agent("queued", model=ScriptedModel(["later"]), on_message="queue"))
    sender = Agent(
        "sender",
        model=ScriptedModel(
            [[call("tell", to="runner", text="go"), call("tell", to="queued", text="wait")], "ok"]
        ),
        tools=[tell],
    )
    sim.spawn(sender).run("start")
    sim.run()
    assert sim.now == 4.0  # sent at 0, arrived at 3, answered at 4
    runner_log = [e.type for e in runner.context().events]
    assert runner_log[:3] == ["message_received", "user_message", "turn_start"]
    assert runner.context().messages[-1].content == "on it"
    queued_types = [e.type for e in queued.context().events]
    assert queued_types == ["message_received", "user_message"]
    assert queued.run("now?").output == "later"


# -- the world and its series ----------------------------------------------------------------


def test_collected_series_become_rows_csv_and_a_dataframe() -> None:
    sim = Simulation()
    counter = {"n": 0}
    sim.every(1.0, lambda: counter.update(n=counter["n"] + 1))
    sim.collect("n", lambda: counter["n"], every=2.0)
    sim.collect("half", lambda: counter["n"] / 2, every=4.0)
    sim.run(until=4.0)
    table = sim.rows()
    assert table.columns == ["time", "n", "half"]
    assert table.column("time") == [0.0, 2.0, 4.0]
    assert table.column("half")[1] is None
    text = table.to_csv()
    assert text.splitlines()[0] == "time,n,half"
    pytest.importorskip("pandas")
    frame = table.to_dataframe()
    # at one time, calls run in the order they were scheduled: the counter's first tick (at
    # 0) before the first sample; later, the sample (rescheduled first) before the tick
    assert list(frame["n"]) == [1, 2, 4]


def test_parquet_export_round_trips(tmp_path: Any) -> None:
    pyarrow = pytest.importorskip("pyarrow.parquet")
    sim = Simulation()
    sim.collect("x", lambda: sim.now * 2, every=5.0)
    sim.run(until=10.0)
    sim.rows().to_parquet(tmp_path / "rows.parquet")
    assert pyarrow.read_table(tmp_path / "rows.parquet").to_pydict()["x"] == [0.0, 10.0, 20.0]


def test_export_jsonl_writes_every_event_in_delivery_order(tmp_path: Any) -> None:
    sim = Simulation(seed=5)
    a = sim.spawn(Agent("a", model=ScriptedModel(["one"], latency=2.0)))
    b = sim.spawn(Agent("b", model=ScriptedModel(["two"], latency=1.0)))
    sim.at(0.0, lambda: (a.run_async("x"), b.run_async("y")))
    sim.run()
    path = tmp_path / "log.jsonl"
    count = sim.export_jsonl(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == count == len(sim.events)
    stamps = [line["created_at"] for line in lines]
    assert stamps == sorted(stamps)  # delivery order is time order
    ends = [line["agent_id"] for line in lines if line["type"] == "turn_end"]
    assert ends == ["b", "a"]
    assert set(lines[0]) == {"agent_id", "seq", "type", "created_at", "data"}
    buffer = io.StringIO()
    sim.export_jsonl(buffer)
    assert buffer.getvalue() == path.read_text()


def test_the_simulations_log_holds_each_agents_own_events_in_the_order_they_came() -> None:
    sim = Simulation(seed=5)
    a = sim.spawn(Agent("a", model=ScriptedModel(["one"], latency=2.0)))
    b = sim.spawn(Agent("b", model=ScriptedModel(["two"], latency=1.0)))
    sim.at(0.0, lambda: (a.run_async("x"), b.run_async("y")))
    sim.run()
    logged = sim.events
    for ref in (a, b):  # the same Event objects the agent's own log holds, in its order
        own = [event for agent_id, event in logged if agent_id == ref.agent_id]
        assert own == list(ref.context().events)
        assert [e.seq for e in own] == list(range(len(own)))
    log = sim._host.log
    assert [log[i] for i in range(len(log))] == logged == log[:]
    assert log[-1] == logged[-1]
    assert sim.summary()["events"] == len(logged)


def test_a_function_model_and_parallel_delegation_give_seeded_ids() -> None:
    def ask(messages: list[Any], tools: list[Any]) -> Any:
        return "fine"

    sim = Simulation(seed=1)
    ref = sim.spawn(Agent("a", model=FunctionModel(ask, latency=1.0)))
    assert ref.run("go").output == "fine"
    assert sim.now == 1.0
    first = call("x").id
    Simulation(seed=1)
    assert call("x").id == first  # a new simulation of the same seed: the same ids again


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Simulation(seed=1.5),  # type: ignore[arg-type]
        lambda: Simulation(start=datetime(2025, 1, 1)),
        lambda: Simulation(tool_duration=-1.0),
        lambda: Simulation(tool_duration={"search": -2.0}),
        lambda: Simulation(message_delay="soon"),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_are_user_errors(make: Any) -> None:
    with pytest.raises(UserError):
        make()


def test_bad_schedules_are_user_errors_and_change_nothing() -> None:
    sim = Simulation()
    sim.run(until=10.0)
    with pytest.raises(UserError, match="before now"):
        sim.run(until=5.0)
    with pytest.raises(UserError, match="period > 0"):
        sim.every(0, lambda: None)
    with pytest.raises(UserError, match="function"):
        sim.at(1.0, "not callable")  # type: ignore[arg-type]
    sim.collect("x", lambda: 1)
    with pytest.raises(UserError, match="collected already"):
        sim.collect("x", lambda: 2)
    with pytest.raises(UserError, match="other than 'time'"):
        sim.collect("time", lambda: 2)
    sim.spawn(Agent("a", model=TestModel()), agent_id="a")
    with pytest.raises(UserError, match="taken"):
        sim.spawn(Agent("a", model=TestModel()), agent_id="a")
    with pytest.raises(UserError, match="no column"):
        sim.rows().column("nope")
    quiet = Simulation(record_events=False)
    with pytest.raises(UserError, match="record_events"):
        quiet.export_jsonl(io.StringIO())


# -- the collector --------------------------------------------------------------------------


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def _one_agent_run(sim: Simulation) -> None:
    sim.spawn(Agent("a", model=ScriptedModel(["ok"]))).run_async("go")


def test_a_run_leaves_the_collector_as_it_found_it_and_frees_cycles() -> None:
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    kept: list[_Cycle] = []
    refs: dict[str, weakref.ref[_Cycle]] = {}
    seen: dict[str, Any] = {}

    def make() -> None:
        young, old = _Cycle(), _Cycle()
        refs["young"], refs["old"] = weakref.ref(young), weakref.ref(old)
        kept.append(old)
        del young
        gc.collect(0)  # a young collection while driving: the dead cycle goes, the live one stays
        seen["young after"] = refs["young"]()
        seen["frozen while driving"] = gc.get_freeze_count()

    sim = Simulation(seed=1)
    sim.at(1.0, make)
    sim.at(2.0, kept.clear)
    _one_agent_run(sim)
    sim.run()

    assert seen["young after"] is None
    assert seen["frozen while driving"] > frozen  # what survived is set aside while driving
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert refs["old"]() is None  # the cycle that outlived its collection is freed after all


def test_cycles_that_die_old_are_freed_during_a_long_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A full collection at every young one (by default: when what is set aside has doubled).
    monkeypatch.setattr(_collector, "FIRST_FULL", 0)
    monkeypatch.setattr(_collector, "GROWTH", 1.0)
    refs: list[weakref.ref[_Cycle]] = []
    current: list[list[_Cycle]] = [[]]
    alive: list[int] = []

    def tick() -> None:
        batch = [_Cycle() for _ in range(500)]
        refs.extend(weakref.ref(c) for c in batch)
        current[0] = batch  # the last tick's cycles are garbage now, but old: set aside
        gc.collect(0)
        alive.append(sum(r() is not None for r in refs))

    sim = Simulation(seed=1)
    sim.every(1.0, tick)
    sim.run(until=40.0)

    assert len(alive) == 41  # at 0, 1, ... 40
    assert max(alive) <= 3 * 500  # the last tick's and this one's: the rest were freed


class _CountedCycle:
    alive = 0

    def __init__(self) -> None:
        self.me = self
        _CountedCycle.alive += 1

    def __del__(self) -> None:
        _CountedCycle.alive -= 1


def test_what_a_world_allocates_is_set_aside_unscanned_and_its_dead_cycles_freed_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_collector, "SET_ASIDE_EVERY", 1_000)
    monkeypatch.setattr(_collector, "FIRST_FULL", 8_000)
    monkeypatch.setattr(_collector, "GROWTH", 1.0)  # not three times this test process
    current: list[list[_CountedCycle]] = [[]]
    alive: list[int] = []
    generations: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and _collector.state.depth:  # while the simulation drives
            generations.append(info["generation"])

    def tick() -> None:
        # The last tick's cycles become garbage: only a full collection can free them.
        current[0] = [_CountedCycle() for _ in range(2_000)]
        alive.append(_CountedCycle.alive)

    sim = Simulation(seed=1)
    sim.every(1.0, tick)
    gc.collect()
    gc.callbacks.append(watch)
    try:
        sim.run(until=40.0)
    finally:
        gc.callbacks.remove(watch)
        current.clear()

    assert 0 not in generations  # nothing was scanned young: set aside as it was
    assert generations.count(2) >= 5  # a full collection each time the budget was passed
    assert len(alive) == 41
    assert max(alive) <= 8 * 2_000  # of 82,000 made: the dead ones were freed every few ticks


def test_the_first_full_collection_waits_for_three_times_what_was_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_collector, "SET_ASIDE_EVERY", 1_000)
    monkeypatch.setattr(_collector, "FIRST_FULL", 1_000)
    monkeypatch.setattr(_collector.state, "live", None)  # not counted yet in this process
    population = [[i] for i in range(200_000)]  # made before the run: alive all along
    made: list[list[list[int]]] = []
    generations: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and _collector.state.depth:
            generations.append(info["generation"])

    sim = Simulation(seed=1)
    sim.every(1.0, lambda: made.append([[i] for i in range(2_000)]))
    gc.callbacks.append(watch)
    try:
        sim.run(until=40.0)
    finally:
        gc.callbacks.remove(watch)

    assert len(made) == 41
    live = _collector.state.live
    assert live is not None
    assert live >= len(population)
    assert generations == []  # 82,000 set aside, under three times what was alive: no scan
    population.clear()


def test_a_heap_that_shrank_since_it_was_counted_is_counted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What an earlier, larger simulation left as the count of what was alive: long gone.
    monkeypatch.setattr(_collector.state, "live", 10**9)
    monkeypatch.setattr(_collector.state, "blocks", 10**12)
    monkeypatch.setattr(_collector, "SET_ASIDE_EVERY", 1_000)
    monkeypatch.setattr(_collector, "FIRST_FULL", 8_000)
    monkeypatch.setattr(_collector, "GROWTH", 1.0)
    current: list[list[_CountedCycle]] = [[]]
    generations: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and _collector.state.depth:
            generations.append(info["generation"])

    def tick() -> None:
        current[0] = [_CountedCycle() for _ in range(2_000)]

    sim = Simulation(seed=1)
    sim.every(1.0, tick)
    gc.callbacks.append(watch)
    try:
        sim.run(until=20.0)
    finally:
        gc.callbacks.remove(watch)
        current.clear()
    assert _collector.state.live is not None
    assert _collector.state.live < 10**9  # counted again
    assert 2 in generations  # so dead cycles were freed, not kept up to three billion objects


def test_a_disabled_collector_stays_disabled_while_a_simulation_drives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_collector, "SET_ASIDE_EVERY", 1_000)
    monkeypatch.setattr(_collector, "FIRST_FULL", 1_000)
    generations: list[int] = []
    frozen: list[int] = []

    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and _collector.state.depth:
            generations.append(info["generation"])

    def tick() -> None:
        [_Cycle() for _ in range(2_000)]
        frozen.append(gc.get_freeze_count())

    sim = Simulation(seed=1)
    sim.every(1.0, tick)
    gc.callbacks.append(watch)
    gc.disable()
    try:
        sim.run(until=10.0)
    finally:
        gc.enable()
        gc.callbacks.remove(watch)
    assert generations == []
    assert set(frozen) == {0}


def test_objects_an_application_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        seen: list[int] = []

        def look() -> None:
            gc.collect(0)
            seen.append(gc.get_freeze_count())

        sim = Simulation(seed=1)
        sim.at(1.0, look)
        _one_agent_run(sim)
        sim.run()
        assert seen[0] <= frozen  # nothing of the simulation's was set aside among them
        assert gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_simulations_driven_on_two_threads_put_the_collector_back_once() -> None:
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()

    def in_a() -> None:
        gc.collect(0)
        a_in.set()
        assert b_in.wait(10)

    def in_b() -> None:
        b_in.set()
        assert a_done.wait(10)
        gc.collect(0)

    def drive_a() -> None:
        sim = Simulation(seed=1)
        sim.at(1.0, in_a)
        sim.run()
        a_done.set()

    def drive_b() -> None:
        assert a_in.wait(10)
        sim = Simulation(seed=2)
        sim.at(1.0, in_b)
        sim.run()

    threads = [threading.Thread(target=drive_a), threading.Thread(target=drive_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert gc.get_threshold() == thresholds  # A ended first, B last: put back once, by B
    assert gc.get_freeze_count() == frozen
