"""RayRuntime has Runtime's API: runs, streams, suspension, placement, what crosses the wire."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Answer, Budget, Event, RunResult, Subagent, ToolResultMessage
from actors.exceptions import (
    AgentDefinitionError,
    AgentStoppedError,
    BudgetExceeded,
    UserError,
    WireError,
)
from actors.store import MemoryStore, SQLiteStore
from actors.testing import ScriptedModel, call
from on_ray import agents

BOUND = 60.0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path_factory.mktemp("ray") / "sessions.db") as opened:
        yield opened


@pytest.fixture(scope="module")
def runtime(ray_cluster: Any, store: SQLiteStore) -> Iterator[Any]:
    from actors.ray import RayRuntime

    with RayRuntime(hosts=2, store=store, tool_context_factory=agents.host_context) as opened:
        yield opened


@pytest.fixture(scope="module")
def host_pids(ray_cluster: Any, runtime: Any) -> list[int]:
    return [ray_cluster.get(h.ready.remote()) for h in runtime.host_handles()]


def results(result: RunResult[Any]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in result.messages if isinstance(m, ToolResultMessage)}


def test_a_run_answers_like_the_local_runtime(runtime: Any) -> None:
    ref = runtime.spawn(Agent("hello", model=ScriptedModel(["Hi!"])))
    result = ref.run("Hello?", timeout=BOUND)
    assert (result.status, result.output) == ("completed", "Hi!")
    assert ref.status == "idle"
    events = [e.type for e in ref.context().events]
    assert "user_message" in events
    assert "assistant_message" in events


def test_a_spread_child_runs_on_another_host_and_its_result_comes_back(
    runtime: Any, host_pids: list[int]
) -> None:
    ref = runtime.spawn(agents.PIDS_LEAD, agent_id="pids")
    result = ref.run("go", timeout=BOUND)
    assert result.output == "done"
    contents = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    root_pid = int(contents[-1].content)  # the lead's own `where`
    near, far = (m.content for m in contents[:2])
    assert root_pid in host_pids
    assert "ok" in near
    assert "ok" in far
    # Each worker said where it ran: the near one with its parent, the far one elsewhere.
    near_ctx = runtime.ref("pids").tree()
    assert [c.status for c in near_ctx.children] == ["finished", "finished"]
    stored = {a.record.agent_id: a.context for a in _load(runtime, "pids").agents}
    near_pid = int(_first_result(stored["pids-sub-1"]))
    far_pid = int(_first_result(stored["pids-sub-2"]))
    assert near_pid == root_pid
    assert far_pid in host_pids
    assert far_pid != root_pid


def _load(runtime: Any, root_id: str) -> Any:
    root = runtime._client.roots[root_id]
    return root.seed.store.open().load(root.session_id)


def test_tool_context_is_rebuilt_on_each_host_by_the_factory(
    runtime: Any, host_pids: list[int]
) -> None:
    worker = agents.worker(call("whose"), "ok", tools=(agents.whose,))
    lead = Agent(
        "lead",
        model=ScriptedModel(
            [[call("near", task="t"), call("far", task="t"), call("whose")], "done"]
        ),
        tools=[agents.whose],
        subagents=[Subagent(worker, name="near"), Subagent(worker, name="far", placement="spread")],
    )
    ref = runtime.spawn(lead, tool_context=agents.Settings("db://x"))
    assert ref.run("go", timeout=BOUND).output == "done"
    logs = {a.record.agent_id: a.context for a in _load(runtime, ref.agent_id).agents}
    seen = {agent: _first_result(context) for agent, context in logs.items()}
    near, far = seen[f"{ref.agent_id}-sub-1"], seen[f"{ref.agent_id}-sub-2"]
    assert near.startswith("connected to db://x in ")
    assert far.startswith("connected to db://x in ")
    assert near != far  # each host built its own from the same settings
    assert {int(near.rsplit(" ", 1)[1]), int(far.rsplit(" ", 1)[1])} == set(host_pids)


def test_a_narrowed_tool_context_travels_to_a_spread_child_as_it_is(
    runtime: Any, host_pids: list[int]
) -> None:
    worker = agents.worker(call("whose"), "ok", tools=(agents.whose,))
    lead = agents.lead(
        [Subagent(worker, name="far", placement="spread", tool_context=agents.narrow)],
        call("far", task="t"),
        "done",
    )
    ref = runtime.spawn(lead, tool_context=agents.Settings("db://x"))
    assert ref.run("go", timeout=BOUND).output == "done"
    logs = {a.record.agent_id: a.context for a in _load(runtime, ref.agent_id).agents}
    seen = _first_result(logs[f"{ref.agent_id}-sub-1"])
    # narrowed on the parent's host from what its factory built there; not rebuilt again
    assert seen.startswith("narrowed(connected to db://x in ")
    parent_pid = host_pids[runtime.host_of(ref.agent_id)]
    assert seen == f"narrowed(connected to db://x in {parent_pid})"


def _first_result(context: dict[str, Any]) -> str:
    from actors import AgentContext

    ctx = AgentContext.deserialize(context)
    return next(m.content for m in ctx.messages if isinstance(m, ToolResultMessage))


def test_run_async_and_await(runtime: Any) -> None:
    ref = runtime.spawn(Agent("async", model=ScriptedModel(["one", "two"])))
    assert ref.run_async("a").result(BOUND).output == "one"

    async def second() -> RunResult[Any]:
        result: RunResult[Any] = await ref.run_async("b")
        return result

    assert asyncio.run(second()).output == "two"


def test_run_stream_shows_the_whole_tree_across_hosts(runtime: Any) -> None:
    ref = runtime.spawn(agents.PIDS_LEAD, agent_id="streamed")
    events = list(ref.run_stream("go"))
    kinds = [(e.kind, e.agent_id) for e in events]
    assert kinds[-1] == ("run_ended", "streamed")
    assert events[-1].result is not None
    assert events[-1].result.output == "done"
    started = {agent for kind, agent in kinds if kind == "tool_call_started"}
    # the spread child's tool call streamed from its host, before that child's end
    assert {"streamed", "streamed-sub-1", "streamed-sub-2"} <= started
    finished_far = next(
        i
        for i, e in enumerate(events)
        if e.kind == "subagent_finished" and getattr(e, "child_id", None) == "streamed-sub-2"
    )
    assert kinds.index(("tool_call_started", "streamed-sub-2")) < finished_far


def test_subscribe_sees_each_event_as_it_is_logged(runtime: Any) -> None:
    ref = runtime.spawn(Agent("watched", model=ScriptedModel(["a"])))
    seen: list[Event] = []
    ended = threading.Event()

    def on_event(event: Event) -> None:
        seen.append(event)
        if event.type == "turn_end":
            ended.set()

    unsubscribe = ref.subscribe(on_event)
    ref.run("x", timeout=BOUND)
    assert ended.wait(BOUND)
    unsubscribe()
    assert [e.type for e in seen][:2] == ["turn_start", "user_message"]


def test_a_suspended_spread_child_resumes_through_its_parent(runtime: Any) -> None:
    asker = agents.worker(call("ask", question="colour?"), "got it", tools=(agents.ask,))
    lead = agents.lead(
        [Subagent(asker, name="far", placement="spread")], call("far", task="ask"), "all done"
    )
    ref = runtime.spawn(lead)
    first = ref.run("go", timeout=BOUND)
    assert first.status == "suspended"
    (request,) = first.requests
    assert request.prompt == "colour?"
    second = ref.resume({request.id: Answer(ok=True, data="blue")}, timeout=BOUND)
    assert (second.status, second.output) == ("completed", "all done")
    assert "colour? -> blue" in str(_load(runtime, ref.agent_id).agents)


def test_the_approval_handler_decides_for_a_child_on_another_host(runtime: Any) -> None:
    launcher = agents.worker(
        [call("launch", target="probe"), call("launch", target="moon")],
        "tried",
        tools=(agents.launch,),
    )
    lead = agents.lead(
        [Subagent(launcher, name="far", placement="spread")], call("far", task="go"), "done"
    )
    ref = runtime.spawn(lead, approval_handler=agents.approve_launches)
    assert ref.run("go", timeout=BOUND).output == "done"
    child = {a.record.agent_id: a.context for a in _load(runtime, ref.agent_id).agents}[
        f"{ref.agent_id}-sub-1"
    ]
    outcomes = [
        (e["data"]["content"], e["data"].get("is_error", False))
        for e in child["events"]
        if e["type"] == "tool_result"
    ]
    assert outcomes[0] == ("launched probe", False)
    assert outcomes[1][1] is True  # the moon launch was denied
    assert "rejected" in outcomes[1][0]


def test_cancel_and_steer_reach_the_agent(runtime: Any) -> None:
    slow = Agent("slow", model=ScriptedModel(["late"], latency=30))
    ref = runtime.spawn(slow)
    future = ref.run_async("x")
    ref.send("and another thing")
    ref.cancel("enough")
    result = future.result(BOUND)
    assert result.status == "cancelled"
    types = [e.type for e in ref.context().events]
    assert "steered" in types
    assert "cancelled" in types


def test_cancelling_a_tree_cancels_its_child_on_another_host(
    ray_cluster: Any, runtime: Any, store: SQLiteStore, latch: Any
) -> None:
    lingering = agents.worker(call("linger"), "never", tools=(agents.linger,))
    lead = agents.lead(
        [Subagent(lingering, name="far", placement="spread")], call("far", task="x"), "after"
    )
    ref = runtime.spawn(lead)
    future = ref.run_async("go")
    ray_cluster.get(latch.wait.remote(), timeout=BOUND)
    ref.cancel("enough")
    assert future.result(BOUND).status == "cancelled"

    def child() -> Any:
        agents_ = {a.record.agent_id: a for a in store.load(ref.session_id).agents}
        return agents_[f"{ref.agent_id}-sub-1"]

    # The parent's run ends without waiting for its children to finish cancelling; the child's
    # host writes its end on its own time, and tells nobody here: poll the store, bounded. (On
    # the way, a cancelled child is written "idle" -- its loop's status once the run ended --
    # just before its end makes it "cancelled".)
    deadline = time.monotonic() + BOUND
    while child().record.status in ("running", "idle") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child().record.status == "cancelled"
    assert "cancelled" in [e["type"] for e in child().context["events"]]


def test_delegated_children_follow_the_runtime_placement(
    ray_cluster: Any, store: SQLiteStore
) -> None:
    from actors.ray import RayRuntime

    with RayRuntime(hosts=2, store=store, placement="spread") as spread:
        ref = spread.spawn(agents.DELEGATING_LEAD)
        result = ref.run("go", timeout=BOUND)
        assert result.output == "done"
        lead_pid, helper_pid = (int(x) for x in results(result).popitem()[1].split("/"))
        assert lead_pid != helper_pid  # the helper ran on the other host


def test_a_spread_child_past_its_timeout_is_an_error_for_the_parent(runtime: Any) -> None:
    sleeper = Agent("sleeper", model=ScriptedModel(["late"], latency=30))
    lead = agents.lead(
        [Subagent(sleeper, name="far", placement="spread", timeout=0.5)],
        call("far", task="sleep"),
        "moved on",
    )
    ref = runtime.spawn(lead)
    result = ref.run("go", timeout=BOUND)
    assert result.output == "moved on"
    (content,) = results(result).values()
    assert "timed out" in content


def test_a_kept_spread_child_continues_its_context(runtime: Any) -> None:
    keeper = Agent("keeper", model=ScriptedModel(["first", "second"], per_agent=True))
    lead = agents.lead(
        [Subagent(keeper, name="far", placement="spread", keep=True)],
        call("far", task="one"),
        call("far", task="two"),
        "done",
    )
    ref = runtime.spawn(lead)
    result = ref.run("go", timeout=BOUND)
    assert result.output == "done"
    assert list(results(result).values()) == ["first", "second"]
    (child,) = ref.tree().children
    assert child.status == "idle"  # alive on its host, waiting for the next task
    ref.stop()
    assert ref.status == "stopped"


def test_open_session_finds_the_live_root_and_restore_rebuilds_a_stopped_one(
    runtime: Any, store: SQLiteStore
) -> None:
    spec = Agent("assistant", model=ScriptedModel(["one", "two", "three"]))
    first = runtime.open_session(spec, session_id="user-1")
    assert first.run("hi", timeout=BOUND).output == "one"
    again = runtime.open_session(spec, session_id="user-1")
    assert again.agent_id == first.agent_id == "user-1"
    first.stop()
    restored = runtime.open_session(spec, session_id="user-1")
    # a fresh copy of the spec travels with each restore: its script starts over
    assert restored.run("again", timeout=BOUND).output == "one"
    assert len([m for m in restored.context().messages if m.role == "user"]) == 2


def test_callers_opening_one_session_at_once_all_get_its_root(runtime: Any) -> None:
    spec = Agent("assistant", model=ScriptedModel(["one", "two"], per_agent=True))
    callers = 6
    barrier = threading.Barrier(callers)

    def open_together() -> list[Any]:
        out: list[Any] = [None] * callers

        def one(i: int) -> None:
            barrier.wait(BOUND)
            try:
                out[i] = runtime.open_session(spec, session_id="crowd")
            except Exception as exc:
                out[i] = exc

        threads = [threading.Thread(target=one, args=(i,)) for i in range(callers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOUND)
        return out

    new = open_together()  # a new session
    assert [getattr(r, "agent_id", r) for r in new] == ["crowd"] * callers
    assert new[0].run("hi", timeout=BOUND).output == "one"
    new[0].stop()
    stored = open_together()  # only in the store now
    assert [getattr(r, "agent_id", r) for r in stored] == ["crowd"] * callers
    assert stored[0].run("again", timeout=BOUND).status == "completed"
    assert len([m for m in stored[0].context().messages if m.role == "user"]) == 2
    with pytest.raises(AgentDefinitionError, match="assistant"):
        runtime.open_session(Agent("other", model=ScriptedModel(["x"])), session_id="crowd")
    stored[0].stop()


def test_ref_by_id_reaches_a_child_on_another_host(runtime: Any) -> None:
    keeper = Agent("kept", model=ScriptedModel(["ready"], per_agent=True))
    lead = agents.lead(
        [Subagent(keeper, name="far", placement="spread", keep=True)],
        call("far", task="one"),
        "done",
    )
    ref = runtime.spawn(lead)
    ref.run("go", timeout=BOUND)
    child = runtime.ref(f"{ref.agent_id}-sub-1")
    assert child.parent_id == ref.agent_id
    assert child.status == "idle"
    assert [e.type for e in child.context().events][-1] == "turn_end"
    ref.stop()


# -- what crosses the wire, and bad input -------------------------------------------------------


def test_a_tool_context_that_cannot_travel_is_refused_naming_the_part(runtime: Any) -> None:
    with pytest.raises(
        WireError, match=r"tool_context\['lock'\].*RayRuntime\(tool_context_factory"
    ):
        runtime.spawn(Agent("a"), tool_context={"url": "x", "lock": threading.Lock()})


def test_a_spec_that_cannot_travel_is_refused(runtime: Any) -> None:
    lock = threading.Lock()

    def holds_a_lock() -> str:
        """Hold a lock."""
        with lock:
            return "x"

    with pytest.raises(WireError, match="agent 'locked'"):
        runtime.spawn(Agent("locked", tools=[holds_a_lock]))


def test_bad_arguments_are_user_errors(ray_cluster: Any, runtime: Any) -> None:
    from actors.ray import RayRuntime

    with pytest.raises(UserError, match="hosts"):
        RayRuntime(hosts=0)
    with pytest.raises(UserError, match="placement"):
        RayRuntime(placement="everywhere")
    with pytest.raises(WireError, match="MemoryStore"):
        RayRuntime(store=MemoryStore())
    with pytest.raises(AgentDefinitionError, match="placement"):
        Agent("p", subagents=[Subagent(Agent("c"), placement="moon")])  # type: ignore[arg-type]
    with pytest.raises(UserError, match="taken"):
        runtime.spawn(Agent("dup", model=ScriptedModel([])), agent_id="pids")
    with pytest.raises(UserError, match="idle_after"):
        RayRuntime(idle_after=-1)


def test_a_closed_runtime_refuses_new_agents(ray_cluster: Any, tmp_path: Path) -> None:
    from actors.ray import RayRuntime

    rt = RayRuntime(hosts=1)
    ref = rt.spawn(Agent("a", model=ScriptedModel(["x"])))
    assert ref.run("go", timeout=BOUND).output == "x"
    rt.shutdown()
    with pytest.raises(UserError, match="shut down"):
        rt.spawn(Agent("b"))
    # Its refs say so at once, as a closed Runtime's do (no wait for a cluster that is gone).
    for use in (lambda: ref.run("again", timeout=BOUND), lambda: ref.send("x"), ref.context):
        with pytest.raises(AgentStoppedError, match="shut down"):
            use()
    assert ref.status == "stopped"


def test_a_shared_budget_holds_for_a_child_on_another_host(
    runtime: Any, store: SQLiteStore
) -> None:
    """The spread child reserves in the store's budget too: the lead's answer does not fit."""
    far = Agent("far-worker", model=ScriptedModel(["found"], per_agent=True))
    lead = agents.lead(
        [Subagent(far, name="far", placement="spread")], call("far", task="x"), "after"
    )
    ref = runtime.spawn(lead, budget=Budget(requests=2, shared="ray-team"))
    with pytest.raises(BudgetExceeded, match="shared budget 'ray-team' requests=2 has 0 left"):
        ref.run("go", timeout=BOUND)  # the lead's request, its child's, and no third
    totals = store.read_budget("ray-team")
    assert (totals.spent[0], totals.holds) == (2, 0)
