"""Regression tests for bugs found in review of the runtime, actor and loop."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from typing import Any

import pytest

from actors import Agent, Answer, Pending, Request, RunContext, Runtime, Subagent, tool
from actors.exceptions import UserError
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call


@tool
def ask(ctx: RunContext[Any], question: str) -> str:
    """Ask the host.

    Args:
        question: What to ask.
    """
    if ctx.answer is None:
        return Pending(Request(kind="input", prompt=question))  # type: ignore[return-value]
    return f"answer: {ctx.answer.data}"


def test_steering_sent_to_a_suspended_run_survives_a_restore() -> None:
    model = ScriptedModel([call("ask", question="q"), "done"])
    agent = Agent("a", model=model, tools=[ask])
    with MemoryStore() as store:
        with Runtime() as rt:
            ref = rt.spawn(agent, store=store, session_id="s")
            result = ref.run("go", timeout=5)
            assert result.status == "suspended"
            ref.send("also consider this")
            ref.context()  # the steer is handled (and persisted) before we go on
        model2 = ScriptedModel(["done"])
        agent2 = Agent("a", model=model2, tools=[ask])
        with Runtime() as rt:
            ref = rt.restore("s", store=store, agents=[agent2])
            (request,) = result.requests
            resumed = ref.resume({request.id: Answer(data="x")}, timeout=5)
    assert resumed.completed
    contents = [getattr(m, "content", "") for m in model2.requests[0].messages]
    assert "also consider this" in contents


def test_a_restored_suspended_run_reports_its_whole_usage() -> None:
    agent = Agent("a", model=ScriptedModel([call("ask", question="q"), "done"]), tools=[ask])
    with MemoryStore() as store:
        with Runtime() as rt:
            ref = rt.spawn(agent, store=store, session_id="s")
            first = rt_result = ref.run("go", timeout=5)
            (request,) = rt_result.requests
            answers = {request.id: Answer(data="x")}
            live = ref.resume(answers, timeout=5)
        with Runtime() as rt:
            ref = rt.spawn(
                Agent("a", model=ScriptedModel([call("ask", question="q"), "done"]), tools=[ask]),
                store=store,
                session_id="s2",
            )
            suspended = ref.run("go", timeout=5)
        again = Agent("a", model=ScriptedModel(["done"]), tools=[ask])
        with Runtime() as rt:
            ref = rt.restore("s2", store=store, agents=[again])
            (request,) = suspended.requests
            restored = ref.resume({request.id: Answer(data="x")}, timeout=5)
    assert first.status == "suspended"
    assert live.usage.requests == 2
    assert restored.usage.requests == live.usage.requests
    assert restored.usage.tool_calls == live.usage.tool_calls


@tool
def block(ctx: RunContext[Any]) -> str:
    """Work until cancelled."""
    ctx.cancellation.wait(5)
    return "stopped" if ctx.cancelled else "never cancelled"


def _slow_child() -> Agent:
    return Agent(
        "slow", model=ScriptedModel([call("block"), "late"], per_agent=True), tools=[block]
    )


def test_a_timed_out_delegated_child_is_booked_once() -> None:
    child = _slow_child()

    @tool
    def hand_off(ctx: RunContext[Any]) -> str:
        """Delegate."""
        try:
            return str(ctx.delegate(child, "work", timeout=0.3))
        except Exception as exc:
            return f"failed: {type(exc).__name__}"

    lead = Agent("lead", model=ScriptedModel([call("hand_off"), "done"]), tools=[hand_off])
    with Runtime() as rt:
        ref = rt.spawn(lead)
        result = ref.run("go", timeout=5)
        events = ref.context().events
    finished = [e for e in events if e.type == "subagent_finished"]
    assert result.completed
    assert "failed: RunTimeoutError" in [m.content for m in result.messages if m.role == "tool"]
    assert len(finished) == 1, [e.data for e in finished]


def test_a_timed_out_subagent_still_counts_toward_the_tree_usage() -> None:
    child = _slow_child()
    lead = Agent(
        "lead",
        model=ScriptedModel([call("slow", task="work"), "done"]),
        subagents=[Subagent(child, timeout=0.3)],
    )
    with Runtime() as rt:
        result = rt.spawn(lead).run("go", timeout=5)
    assert result.completed
    assert result.tree_usage.requests == result.usage.requests + 1  # the child's one request


def test_a_child_spawned_while_the_runtime_shuts_down_does_not_outlive_it() -> None:
    kept = Agent("helper", model=ScriptedModel(["hi"], per_agent=True))
    lead = Agent(
        "lead",
        model=ScriptedModel([call("helper", task="t"), "done"]),
        subagents=[Subagent(kept, keep=True)],
    )
    rt = Runtime()
    with rt:
        ref = rt.spawn(lead)
        spawning = threading.Event()

        def on_event(event: Any) -> None:
            # On the lead's thread, between logging the spawn and starting the child: the
            # runtime shuts down right there (its wait for the busy lead is cut short).
            if getattr(event, "type", None) == "subagent_spawned" and not spawning.is_set():
                spawning.set()
                rt.shutdown(timeout=0.05)

        ref.subscribe(on_event)
        future = ref.run_async("go")
        assert spawning.wait(5)
        with contextlib.suppress(Exception):
            future.result(5)
    assert rt.live_agents() == 0


def test_a_resumed_subagent_run_has_a_deadline_again() -> None:
    working = threading.Event()

    @tool
    def work(ctx: RunContext[Any]) -> str:
        """Work until cancelled."""
        working.set()
        ctx.cancellation.wait(5)
        return "stopped"

    child = Agent(
        "child",
        model=ScriptedModel([call("ask", question="q"), call("work"), "late"], per_agent=True),
        tools=[ask, work],
    )
    lead = Agent(
        "lead",
        model=ScriptedModel([call("child", task="t"), "done"]),
        subagents=[Subagent(child, timeout=30.0)],
    )
    with Runtime() as rt:
        # The subagent deadlines, fired by hand (tools' own 60 s timers are left alone).
        deadlines: list[Any] = []
        call_later = rt._host.effects.call_later

        def record(delay: float, callback: Any) -> Any:
            if delay == 30.0:
                deadlines.append(callback)
                return lambda: None
            return call_later(delay, callback)

        rt._host.effects.call_later = record  # type: ignore[method-assign]
        ref = rt.spawn(lead)
        suspended = ref.run("go", timeout=5)
        assert suspended.status == "suspended"
        deadlines.pop()()  # the first deadline passes while the host thinks: nothing runs
        (request,) = suspended.requests
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            resumed = pool.submit(ref.resume, {request.id: Answer(data="x")}, timeout=3)
            assert working.wait(5)
            assert len(deadlines) == 1, "the resumed run got no deadline"
            deadlines.pop()()
            result = resumed.result(5)
    assert result.completed
    assert "timed out" in [m for m in result.messages if m.role == "tool"][-1].content


def test_a_run_that_suspends_just_as_it_times_out_is_not_reported_resumable() -> None:
    release = threading.Event()
    parked = threading.Event()

    @tool
    def slow_ask(ctx: RunContext[Any]) -> str:
        """Ask the host, slowly."""
        if ctx.answer is None:
            release.wait(5)
            return Pending(Request(kind="input", prompt="q"))  # type: ignore[return-value]
        return "answered"

    agent = Agent("a", model=ScriptedModel([call("slow_ask"), "done"]), tools=[slow_ask])
    with Runtime() as rt:
        ref = rt.spawn(agent)
        ref.subscribe(lambda e: parked.set() if getattr(e, "type", "") == "suspended" else None)
        cancel = ref.cancel

        def late_cancel(reason: str = "cancelled") -> None:
            # The run suspends between the host's timeout and its cancel reaching the agent.
            release.set()
            assert parked.wait(5)
            cancel(reason)

        ref.cancel = late_cancel  # type: ignore[method-assign]
        try:
            outcome: Any = ref.run("go", timeout=0.1)
        except Exception as exc:
            outcome = exc
        status = ref.context().events[-1].data.get("reason")
    # The cancel did reach the suspended run: handing the host its open requests would be a
    # lie (resume would answer "no open requests").
    assert status == "cancelled"
    assert not (hasattr(outcome, "status") and outcome.status == "suspended"), outcome


def test_a_kept_child_stopped_with_its_tree_comes_back_on_restore() -> None:
    def spec() -> Agent:
        helper = Agent("helper", model=ScriptedModel(["one", "two"], per_agent=True))
        script = [call("helper", task="a"), "ok", call("helper", task="b"), "ok again"]
        return Agent(
            "lead",
            model=ScriptedModel(script, per_agent=True),
            subagents=[Subagent(helper, keep=True)],
        )

    with MemoryStore() as store:
        with Runtime() as rt:
            ref = rt.spawn(spec(), store=store, session_id="s")
            assert ref.run("go", timeout=5).completed
            ref.stop()
        with Runtime() as rt:
            ref = rt.restore("s", store=store, agents=[spec()])
            result = ref.run("again", timeout=5)
    assert [m.content for m in result.messages if m.role == "tool"] == ["one", "two"]


class _EagerModel:
    """A model whose ``request`` checks its input before it returns the coroutine."""

    name = "eager"

    def request(self, request: Any) -> Any:
        raise ValueError("no API key configured")


def test_a_model_that_raises_before_its_coroutine_starts_fails_the_run() -> None:
    agent = Agent("a", model=_EagerModel())  # type: ignore[arg-type]
    with Runtime() as rt:
        ref = rt.spawn(agent)
        try:
            ref.run("go", timeout=3)
        except Exception as exc:
            error: Exception = exc
    assert type(error).__name__ == "RunFailedError", repr(error)
    assert "no API key configured" in str(error)


def test_restoring_a_session_whose_ids_are_taken_is_refused_not_leaked() -> None:
    def spec() -> Agent:
        return Agent("assistant", model=ScriptedModel(["a", "b"], per_agent=True))

    with MemoryStore() as store:
        for session_id in ("s1", "s2"):
            with Runtime() as rt:
                rt.spawn(spec(), store=store, session_id=session_id).run("hi", timeout=5)
        with Runtime() as rt:
            first = rt.restore("s1", store=store, agents=[spec()])
            with pytest.raises(UserError, match="already has agents"):
                rt.restore("s2", store=store, agents=[spec()])
            assert first.run("again", timeout=5).output == "b"
            assert rt.live_agents() == 1
