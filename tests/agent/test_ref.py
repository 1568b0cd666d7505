"""The host's face: run, run_async (awaited from asyncio), run_sync, context, stop."""

from __future__ import annotations

import asyncio
import threading

import pykka
import pytest

from actors import Agent, AgentRef, RunResult, Runtime, UserMessage, run_sync, tool
from actors.exceptions import AgentStoppedError, UserError
from actors.testing import ScriptedModel, call

from .helpers import BOUND


def test_run_async_can_be_awaited_without_blocking_the_event_loop(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()
    released: list[bool] = []

    @tool
    def block() -> str:
        """Wait for the asyncio side to release us."""
        started.set()
        released.append(release.wait(BOUND))
        return "ok"

    ref = rt.spawn(Agent("a", model=ScriptedModel([call("block"), "done"]), tools=[block]))

    async def main() -> RunResult[str]:
        waiting = asyncio.ensure_future(ref.run_async("?"))
        # If awaiting the run blocked the loop, these awaits could not complete.
        assert await asyncio.to_thread(started.wait, BOUND)
        await asyncio.sleep(0)
        assert not waiting.done()
        release.set()
        return await waiting

    result = asyncio.run(main())
    assert result.output == "done"
    assert released == [True]


def test_run_async_future_result_and_callback(rt: Runtime) -> None:
    done = threading.Event()
    ref = rt.spawn(Agent("a", model=ScriptedModel(["hi"])))
    future = ref.run_async("?")
    future.add_done_callback(lambda _f: done.set())
    assert future.result(BOUND).output == "hi"
    assert done.wait(BOUND)
    assert future.done()


def test_run_sync_runs_once_and_leaves_no_actor() -> None:
    result = run_sync(Agent("once", model=ScriptedModel(["hello"])), "hi", metadata={"k": 1})
    assert result.output == "hello"
    assert result.metadata == {"k": 1}
    assert pykka.ActorRegistry.get_all() == []


def test_context_is_a_copy(rt: Runtime) -> None:
    ref = rt.spawn(Agent("a", model=ScriptedModel(["hi"])), metadata={"k": [1]})
    ref.run("?")
    snapshot = ref.context()
    snapshot.add_message(UserMessage(content="injected"))
    assert len(ref.context().messages) == 2
    assert ref.context().metadata == {"k": [1]}


def test_stop_then_every_call_says_the_agent_stopped(rt: Runtime) -> None:
    ref = rt.spawn(Agent("a", model=ScriptedModel(["hi"])))
    ref.stop()
    assert ref.status == "stopped"
    assert rt.live_agents() == 0
    with pytest.raises(AgentStoppedError):
        ref.run("?")
    with pytest.raises(AgentStoppedError):
        ref.context()
    with pytest.raises(AgentStoppedError):
        ref.cancel()


def test_stopping_a_running_agent_fails_its_run(rt: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def block() -> str:
        """Block."""
        started.set()
        release.wait(BOUND)
        return "late"

    ref = rt.spawn(Agent("a", model=ScriptedModel([call("block"), "x"]), tools=[block]))
    future = ref.run_async("?")
    assert started.wait(BOUND)
    ref.stop()
    with pytest.raises(AgentStoppedError):
        future.result(BOUND)
    release.set()


def test_caller_mistakes_are_user_errors(rt: Runtime) -> None:
    ref: AgentRef = rt.spawn(Agent("a", model=ScriptedModel([])))
    with pytest.raises(UserError):
        ref.run(42)  # type: ignore[arg-type]
    with pytest.raises(UserError):
        ref.send(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="plain JSON"):
        rt.spawn(Agent("b", model=ScriptedModel([])), metadata={"x": object()})
    with pytest.raises(UserError):
        rt.spawn("not an agent")  # type: ignore[arg-type]


def test_ids_are_unique_within_a_runtime(rt: Runtime) -> None:
    agent = Agent("same", model=ScriptedModel(["a"], per_agent=True))
    ids = [rt.spawn(agent).agent_id for _ in range(3)]
    assert ids == ["same", "same-2", "same-3"]


def test_a_shut_down_runtime_refuses_to_spawn() -> None:
    with Runtime() as rt:
        ref = rt.spawn(Agent("a", model=ScriptedModel(["x"])))
    with pytest.raises(UserError, match="shut down"):
        rt.spawn(Agent("b"))
    with pytest.raises(AgentStoppedError):
        ref.run("?")
