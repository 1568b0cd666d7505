"""A host killed mid-run: Ray restarts it, waiters get HostLostError, agents come back."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from actors import Agent, AgentContext, Subagent, ToolResultMessage
from actors.exceptions import HostLostError
from actors.loop._recovery import OUTCOME_UNKNOWN
from actors.store import SQLiteStore
from actors.testing import ScriptedModel, call
from on_ray import agents

BOUND = 60.0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path_factory.mktemp("faults") / "sessions.db") as opened:
        yield opened


@pytest.fixture(scope="module")
def runtime(ray_cluster: Any, store: SQLiteStore) -> Iterator[Any]:
    from actors.ray import RayRuntime

    with RayRuntime(hosts=2, store=store) as opened:
        yield opened


def context_of(store: SQLiteStore, session_id: str, agent_id: str) -> tuple[str, AgentContext]:
    stored = {a.record.agent_id: a for a in store.load(session_id).agents}
    entry = stored[agent_id]
    return entry.record.status, AgentContext.deserialize(entry.context)


def test_the_parent_of_a_child_whose_host_dies_gets_a_typed_error_and_goes_on(
    ray_cluster: Any, runtime: Any, store: SQLiteStore, latch: Any
) -> None:
    hanging = Agent(
        "hanging",
        model=ScriptedModel([call("hang"), "never"], per_agent=True),
        tools=[agents.hang],
        tool_timeout=120,
    )
    lead = Agent(
        "lead",
        model=ScriptedModel([call("far", task="hang"), "carried on"], per_agent=True),
        subagents=[Subagent(hanging, name="far", placement="spread")],
    )
    ref = runtime.spawn(lead)
    child_id = f"{ref.agent_id}-sub-1"
    far_host = 1 - runtime.host_of(ref.agent_id)  # two hosts: spread goes to the other
    events = ref.run_stream("go")
    ray_cluster.get(latch.wait.remote(), timeout=BOUND)
    ray_cluster.kill(runtime.host_handles()[far_host], no_restart=False)
    rest = list(events)
    ended = rest[-1]
    assert ended.kind == "run_ended"
    assert ended.error is None
    assert ended.result is not None
    assert ended.result.output == "carried on"
    (answer,) = [m for m in ended.result.messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error
    assert "HostLostError" in answer.content
    # The child's log was closed before its parent heard: the tool call it had in flight is
    # classified as a restore would classify it, and the child is recorded failed.
    status, ctx = context_of(store, ref.session_id, child_id)
    assert status == "failed"
    (recovered,) = [e.data for e in ctx.events if e.type == "recovered"]
    assert len(recovered["outcome_unknown"]) == 1
    assert recovered["not_started"] == []
    assert any(
        m.content == OUTCOME_UNKNOWN for m in ctx.messages if isinstance(m, ToolResultMessage)
    )
    # Ray restarted the host: it answers again.
    assert runtime.live_agents_by_host()[far_host] == 0


def test_a_root_whose_host_is_sigkilled_comes_back_from_its_store(
    ray_cluster: Any, runtime: Any, store: SQLiteStore, latch: Any
) -> None:
    spec = Agent(
        "fragile",
        model=ScriptedModel([call("hang"), "answered after the crash"], per_agent=True),
        tools=[agents.hang],
        tool_timeout=120,
    )
    ref = runtime.spawn(spec)
    handle = runtime.host_handles()[runtime.host_of(ref.agent_id)]
    pid = ray_cluster.get(handle.ready.remote())
    events = ref.run_stream("go")
    ray_cluster.get(latch.wait.remote(), timeout=BOUND)
    os.kill(pid, signal.SIGKILL)
    ended = list(events)[-1]
    assert ended.kind == "run_ended"
    assert isinstance(ended.error, HostLostError)
    # The same ref: the restarted host activates the agent from its store.
    result = ref.run("are you back?", timeout=BOUND)
    assert result.output == "answered after the crash"
    assert ray_cluster.get(handle.ready.remote()) != pid
    ctx = ref.context()
    (recovered,) = [e.data for e in ctx.events if e.type == "recovered"]
    assert len(recovered["outcome_unknown"]) == 1
    turn_ends = [e.data.get("reason") for e in ctx.events if e.type == "turn_end"]
    assert turn_ends[0] == "interrupted"


def test_a_root_without_store_whose_host_died_is_a_clear_error(
    ray_cluster: Any, latch: Any
) -> None:
    from actors.exceptions import AgentStoppedError
    from actors.ray import RayRuntime

    spec = Agent("ephemeral", model=ScriptedModel([call("hang"), "x"]), tools=[agents.hang])
    with RayRuntime(hosts=1) as rt:
        ref = rt.spawn(spec)
        events = ref.run_stream("go")
        ray_cluster.get(latch.wait.remote(), timeout=BOUND)
        ray_cluster.kill(rt.host_handles()[0], no_restart=False)
        assert isinstance(list(events)[-1].error, HostLostError)
        with pytest.raises(AgentStoppedError, match="no store to come back from"):
            ref.run("y", timeout=BOUND)


def test_a_child_whose_host_stops_answering_times_out_for_its_parent(
    ray_cluster: Any, runtime: Any, latch: Any
) -> None:
    lingering = agents.worker(call("linger"), "never", tools=(agents.linger,))
    lead = Agent(
        "patient",
        model=ScriptedModel([call("far", task="linger"), "gave up"], per_agent=True),
        subagents=[Subagent(lingering, name="far", placement="spread", timeout=4)],
    )
    ref = runtime.spawn(lead)
    far = runtime.host_handles()[1 - runtime.host_of(ref.agent_id)]
    pid = ray_cluster.get(far.ready.remote())
    future = ref.run_async("go")
    ray_cluster.get(latch.wait.remote(), timeout=BOUND)
    os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing: not even the deadline
    try:
        result = future.result(BOUND)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.output == "gave up"
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert answer.is_error
    assert "timed out after 4 s, and its host did not confirm" in answer.content
