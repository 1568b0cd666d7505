"""What one caller sends to an agent reaches its mailbox in the order sent, as in one process.

Ray keeps no order among the calls of an async actor, even from one caller: a call that Ray
holds back (here, behind an argument that is not ready) is overtaken by the calls made after
it. The agent still sees a run, then the steer and the cancel sent after it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from actors import Agent, UserMessage
from actors.store import SQLiteStore
from actors.testing import ScriptedModel
from on_ray import agents

BOUND = 60.0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path_factory.mktemp("order") / "sessions.db") as opened:
        yield opened


@pytest.fixture(scope="module")
def runtime(ray_cluster: Any, store: SQLiteStore) -> Iterator[Any]:
    from actors.ray import RayRuntime

    with RayRuntime(hosts=2, store=store) as opened:
        yield opened


class _HeldBack:
    """A host's handle whose next call waits for ``gate`` before Ray sends it."""

    def __init__(self, handle: Any, gate: Any) -> None:
        self._handle = handle
        self._gate = gate
        self._armed = True
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return _Method(self, getattr(self._handle, name))

    def hold(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        with self._lock:
            armed, self._armed = self._armed, False
        if not armed:
            return args
        return tuple(self._gate.hold.remote(arg) for arg in args)


class _Method:
    def __init__(self, owner: _HeldBack, method: Any) -> None:
        self._owner = owner
        self._method = method

    def remote(self, *args: Any) -> Any:
        return self._method.remote(*self._owner.hold(args))


@contextmanager
def first_call_held_back(runtime: Any, agent_id: str, gate: Any) -> Iterator[None]:
    """The driver's next call to the agent's host reaches it only once ``gate`` opens."""
    client = runtime._client
    host = runtime.host_of(agent_id)
    handle = client.handles[host]
    client.handles[host] = _HeldBack(handle, gate)
    try:
        yield
    finally:
        client.handles[host] = handle


@pytest.fixture
def gate(ray_cluster: Any) -> Iterator[Any]:
    actor = ray_cluster.remote(agents.Gate).options(num_cpus=0).remote()
    yield actor
    ray_cluster.kill(actor)


def test_a_steer_and_a_cancel_reach_the_agent_after_the_run_ray_delivered_late(
    runtime: Any, gate: Any
) -> None:
    ref = runtime.spawn(Agent("held", model=ScriptedModel(["late"], latency=30)))
    with first_call_held_back(runtime, ref.agent_id, gate):
        future = ref.run_async("x")
        ref.send("and another thing")  # returns at once: the run is still held back
        ref.cancel("enough")
        gate.open.remote()
        result = future.result(BOUND)
    assert result.status == "cancelled"
    types = [e.type for e in ref.context().events]
    assert types.index("user_message") < types.index("steered") < types.index("cancelled")


def test_a_question_after_a_run_sees_the_run_ray_delivered_late(
    ray_cluster: Any, runtime: Any, gate: Any
) -> None:
    ref = runtime.spawn(Agent("asked", model=ScriptedModel(["late"], latency=30)))
    with first_call_held_back(runtime, ref.agent_id, gate):
        future = ref.run_async("the prompt")
        # Opened from another thread: the question waits behind the run, whenever it opens.
        opener = threading.Thread(target=lambda: ray_cluster.get(gate.open.remote()))
        opener.start()
        ctx = ref.context()
        opener.join(BOUND)
    users = [m.content for m in ctx.messages if isinstance(m, UserMessage)]
    assert users == ["the prompt"]
    assert ref.status == "running"
    ref.cancel()
    assert future.result(BOUND).status == "cancelled"


def test_a_burst_of_messages_arrives_in_order(runtime: Any) -> None:
    ref = runtime.spawn(Agent("burst", model=ScriptedModel(["late"], latency=30)))
    future = ref.run_async("go")
    for i in range(50):
        ref.send(f"note {i}")
    ref.cancel("enough")
    assert future.result(BOUND).status == "cancelled"
    steered = [e.data["content"] for e in ref.context().events if e.type == "steered"]
    assert steered == [f"note {i}" for i in range(50)]


def test_messages_sent_while_a_host_restarts_reach_the_restored_agent_in_order(
    ray_cluster: Any, runtime: Any
) -> None:
    ref = runtime.spawn(Agent("phoenix", model=ScriptedModel(["late"], latency=30)))
    assert ref.status == "idle"
    handle = runtime.host_handles()[runtime.host_of(ref.agent_id)]
    pid = ray_cluster.get(handle.ready.remote())
    os.kill(pid, signal.SIGKILL)
    restarted = pid
    while restarted == pid:  # each call fails until Ray has seen the death, then waits for it
        try:
            restarted = ray_cluster.get(handle.ready.remote(), timeout=BOUND)
        except ray_cluster.exceptions.RayActorError:
            continue
    # The new host does not hold the agent: the run is refused, the agent activated from its
    # store, and the run sent again -- before the steer and the cancel sent after it.
    future = ref.run_async("x")
    ref.send("and another thing")
    ref.cancel("enough")
    assert future.result(BOUND).status == "cancelled"
    events = ref.context().events
    types = [e.type for e in events]
    assert types.index("user_message") < types.index("steered") < types.index("cancelled")
    # Sent once each: the prompt, and the steer joining the transcript after the cancel.
    said = [e.data["content"] for e in events if e.type == "user_message"]
    assert said == ["x", "and another thing"]
