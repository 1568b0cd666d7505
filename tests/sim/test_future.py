"""The futures of a simulation's runs: a `concurrent.futures.Future` that never waits."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

from actors import Agent
from actors.host._messages import settle
from actors.sim import Simulation
from actors.sim._future import InlineFuture
from actors.testing import ScriptedModel


def test_it_is_settled_once_and_tells_its_callbacks() -> None:
    future: InlineFuture[int] = InlineFuture()
    seen: list[Any] = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert not future.done()
    with pytest.raises(concurrent.futures.TimeoutError, match="has not ended this run yet"):
        future.result()
    future.set_result(3)
    with pytest.raises(concurrent.futures.InvalidStateError):
        future.set_result(4)
    settle(future, result=5)  # what a host does: a second answer is dropped, not raised
    assert future.result() == 3
    assert seen == [3]
    future.add_done_callback(lambda f: seen.append("late"))  # done: called at once
    assert seen == [3, "late"]
    assert future.exception() is None
    assert not future.cancel()


def test_an_error_is_raised_by_result_and_a_failing_callback_is_only_logged() -> None:
    future: InlineFuture[int] = InlineFuture()
    seen: list[str] = []

    def broken(_: Any) -> None:
        raise RuntimeError("callback bug")

    future.add_done_callback(broken)
    future.add_done_callback(lambda f: seen.append("next"))
    future.set_exception(ValueError("no"))
    assert seen == ["next"]
    with pytest.raises(ValueError, match="no"):
        future.result()
    assert isinstance(future.exception(), ValueError)


def test_asyncio_can_await_it() -> None:
    future: InlineFuture[str] = InlineFuture()

    async def main() -> str:
        waiting = asyncio.wrap_future(future)
        future.set_result("ok")
        return await waiting

    assert asyncio.run(main()) == "ok"


def test_a_cancelled_one_says_so() -> None:
    future: InlineFuture[int] = InlineFuture()
    assert future.cancel()
    assert future.cancelled()
    assert future.done()
    assert not future.set_running_or_notify_cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        future.result()


def test_a_simulated_runs_future_calls_back_with_its_result() -> None:
    sim = Simulation(seed=1)
    ref = sim.spawn(Agent("a", model=ScriptedModel(["hi"])))
    run = ref.run_async("go")
    ended: list[Any] = []
    run.add_done_callback(lambda f: ended.append(f.result().output))
    assert not run.done()
    assert run.result().output == "hi"  # runs the simulation until the run ends
    assert ended == ["hi"]


def test_reading_a_failed_result_leaves_no_cycle_behind() -> None:
    import gc
    import weakref

    future: InlineFuture[int] = InlineFuture()
    future.set_exception(ValueError("no"))
    gc.disable()
    try:
        with pytest.raises(ValueError, match="no"):
            future.result()
        alive = weakref.ref(future)
        del future
        assert alive() is None  # freed by reference counting, no collection needed
    finally:
        gc.enable()
