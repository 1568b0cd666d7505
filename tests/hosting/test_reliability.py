"""What a long-lived runtime must not do: hang at exit, starve healthy tools, hold what ended."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import threading
import weakref
from typing import Any

import pytest

from actors import (
    Agent,
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    Runtime,
    Subagent,
    TreeLimits,
    Usage,
    tool,
)
from actors.exceptions import StoreError
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call

BOUND = 30.0


@pytest.mark.timeout(60)
def test_a_process_exits_promptly_although_a_tool_never_returns() -> None:
    script = textwrap.dedent(
        """
        import threading
        from actors import Agent, Runtime, tool
        from actors.testing import ScriptedModel, call

        forever = threading.Event()

        @tool(timeout=0.2)
        def stuck() -> str:
            '''Ignore cancellation and never return.'''
            forever.wait()
            return "never"

        agent = Agent("a", model=ScriptedModel([call("stuck"), "gave up"]), tools=[stuck])
        with Runtime() as rt:
            print(rt.spawn(agent).run("go", timeout=20).output, flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "gave up\n"  # and the library, not configured, printed nothing


def test_stuck_tools_do_not_take_the_slots_healthy_tools_need() -> None:
    stuck_started = threading.Semaphore(0)
    forever = threading.Event()

    @tool(timeout=0.2)
    def stuck() -> str:
        """Never return."""
        stuck_started.release()
        forever.wait(BOUND)
        return "late"

    @tool(timeout=5)
    def healthy() -> str:
        """Answer at once."""
        return "fine"

    stuck_agent = Agent(
        "s", model=ScriptedModel([call("stuck"), "gave up"], per_agent=True), tools=[stuck]
    )
    healthy_agent = Agent("h", model=ScriptedModel([call("healthy"), "done"]), tools=[healthy])
    try:
        with Runtime(max_tool_threads=2) as rt:
            for _ in range(2):  # both tool threads end up stuck past their timeouts
                assert rt.spawn(stuck_agent).run("go", timeout=BOUND).output == "gave up"
            for _ in range(2):
                assert stuck_started.acquire(timeout=BOUND)
            assert rt._host.effects.tools.abandoned == 2
            result = rt.spawn(healthy_agent).run("go", timeout=BOUND)
    finally:
        forever.set()
    assert result.messages[-2].content == "fine"


class _ClientModel:
    """A model with a client to close, counting how often it was closed."""

    name = "client"

    def __init__(self) -> None:
        self.closed = 0

    async def request(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    async def aclose(self) -> None:
        self.closed += 1


def test_a_model_client_is_closed_when_no_live_agent_uses_it() -> None:
    shared = _ClientModel()
    with Runtime() as rt:
        first = rt.spawn(Agent("a", model=shared))
        second = rt.spawn(Agent("b", model=shared))
        first.run("hi", timeout=BOUND)
        second.run("hi", timeout=BOUND)
        first.stop()
        assert shared.closed == 0  # the other agent still uses it
        own = [_ClientModel() for _ in range(50)]
        for model in own:
            ref = rt.spawn(Agent("own", model=model))
            ref.run("hi", timeout=BOUND)
            ref.stop()
        # Closing runs on the effects loop: a run on it afterwards comes after every close.
        second.run("again", timeout=BOUND)
        assert [m.closed for m in own] == [1] * 50


def test_stopped_agents_and_their_tool_context_are_released() -> None:
    class Secret:
        pass

    agent = Agent("a", model=ScriptedModel(["ok"], per_agent=True))
    alive: list[weakref.ref[Secret]] = []
    with Runtime() as rt:
        for _ in range(300):
            secret = Secret()
            alive.append(weakref.ref(secret))
            ref = rt.spawn(agent, tool_context=secret)
            ref.run("hi", timeout=BOUND)
            ref.stop()
            del secret, ref
        gc.collect()
        assert [r for r in alive if r() is not None] == []
        assert rt._host.nodes == {}


def test_max_agents_holds_under_a_parallel_fan_out() -> None:
    peak = [0]
    lock = threading.Lock()
    gate = threading.Event()

    def sample(rt: Runtime) -> None:
        with lock:
            peak[0] = max(peak[0], rt.live_agents())

    runtime: list[Runtime] = []

    @tool
    def work() -> str:
        """Work."""
        sample(runtime[0])
        gate.wait(0.05)
        return "done"

    worker = Agent("w", model=ScriptedModel([call("work"), "ok"], per_agent=True), tools=[work])
    lead = Agent(
        "lead",
        model=ScriptedModel([[call("w", task=str(i)) for i in range(40)], "all done"]),
        subagents=[Subagent(worker)],
    )
    with Runtime(limits=TreeLimits(max_agents=10, max_children=100)) as rt:
        runtime.append(rt)
        result = rt.spawn(lead).run("go", timeout=BOUND)
    assert result.output == "all done"
    assert peak[0] <= 10
    refused = [m for m in result.messages if m.role == "tool" and "max agents" in m.content]
    assert refused


class _FailingOnce(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    def _trip(self) -> None:
        if self.fail:
            self.fail = False
            raise StoreError("disk full")

    def put_agent(self, session_id: str, record: Any) -> None:
        self._trip()
        super().put_agent(session_id, record)

    def begin_session(self, session_id: str, root: Any, **kw: Any) -> bool:
        self._trip()  # a new session's root is put here
        return super().begin_session(session_id, root, **kw)

    def append_events(self, session_id: str, agent_id: str, events: Any, **kw: Any) -> None:
        self._trip()
        super().append_events(session_id, agent_id, events, **kw)


def test_a_spawn_the_store_refused_leaves_nothing_behind_and_can_be_retried() -> None:
    store = _FailingOnce()
    agent = Agent("a", model=ScriptedModel(["ok"]))
    with Runtime() as rt:
        with pytest.raises(StoreError):
            rt.spawn(agent, store=store, session_id="s")
        assert rt.live_agents() == 0
        ref = rt.spawn(agent, store=store, session_id="s2")
        assert ref.agent_id == "a"
        assert ref.run("hi", timeout=BOUND).output == "ok"


def test_a_restore_the_store_refused_can_be_retried() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block until released."""
        started.set()
        release.wait(BOUND)
        return "late"

    agent = Agent("a", model=ScriptedModel([call("block"), "first", "second"]), tools=[block])
    store = _FailingOnce()
    store.fail = False
    try:
        with Runtime() as rt:  # shut down mid-run: the turn stays open in the store
            rt.spawn(agent, store=store, session_id="s").run_async("go")
            assert started.wait(BOUND)
    finally:
        release.set()
    store.fail = True  # the recovery's first write fails
    with Runtime() as rt:
        with pytest.raises(StoreError):
            rt.restore("s", store=store, agents=[agent])
        assert rt.live_agents() == 0
        ref = rt.restore("s", store=store, agents=[agent])
        assert ref.run("again", timeout=BOUND).status == "completed"
