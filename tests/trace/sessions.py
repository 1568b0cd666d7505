"""Sessions for the trace tests, made by running real agents offline into a store."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta
from typing import Any

from actors import Agent, Answer, Event, RunContext, Runtime, tool
from actors.cli._demo_team import DEMO_QUESTION, DemoContext, build_team
from actors.exceptions import RunError
from actors.store import AgentRecord, MemoryStore, SessionStore, StoredSession
from actors.testing import FakeClock, ScriptedModel, call

BOUND = 10.0


def clock() -> FakeClock:
    """Each event 1 ms after the previous one: spans have lengths a test can state."""
    return FakeClock(step=timedelta(milliseconds=1))


def demo_session(store: SessionStore, session_id: str = "demo") -> StoredSession:
    """The offline research team of ``actors demo``, its benchmark approved, run to its end."""
    team = build_team(None, pace=0)
    with Runtime(clock=clock()) as runtime:
        ref = runtime.spawn(
            team, store=store, session_id=session_id, tool_context=DemoContext(pace=0)
        )
        result = ref.run(DEMO_QUESTION, timeout=BOUND)
        while result.suspended:
            result = ref.resume({r.id: Answer(ok=True) for r in result.requests})
        assert result.status == "completed"
    return store.load(session_id)


@tool
def record(item: str) -> str:
    """Record something.

    Args:
        item: What to record.
    """
    return f"recorded {item}"


def recorder() -> Agent[Any]:
    return Agent(
        "recorder",
        model=ScriptedModel([call("record", item="a"), "recorded a"]),
        instructions="Record what you are told.",
        tools=[record],
    )


def crashed_and_restored(cut_after: str) -> StoredSession:
    """A session whose process died right after the first ``cut_after`` event, restored.

    The recorder runs to its end in one store; its log up to the cut is copied to another
    store, as a crash would have left it, and a new runtime restores the session from there.
    """
    with MemoryStore() as finished, Runtime(clock=clock()) as runtime:
        runtime.spawn(recorder(), store=finished, session_id="s").run("record a", timeout=BOUND)
        events = [Event.model_validate(e) for e in finished.load("s").agents[0].context["events"]]
    cut = next(e.seq for e in events if e.type == cut_after) + 1
    with MemoryStore() as crashed:
        crashed.create_session("s", root_agent_id="recorder")
        crashed.put_agent("s", AgentRecord("recorder", None, "recorder", "running"))
        crashed.append_events("s", "recorder", events[:cut])
        later = FakeClock(events[cut - 1].created_at + timedelta(seconds=5))
        with Runtime(clock=later) as runtime:
            runtime.restore("s", store=crashed, agents=[recorder()])
        return crashed.load("s")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (pretend).

    Args:
        path: The file.
    """
    return f"deleted {path}"


def suspended_then(answer: Answer | None) -> StoredSession:
    """A run that waits for approval of a tool; answered with ``answer`` unless it is None."""
    agent = Agent(
        "janitor",
        model=ScriptedModel([call("delete_file", path="/tmp/x"), "done"]),
        tools=[delete_file],
    )
    with MemoryStore() as store, Runtime(clock=clock()) as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s")
        result = ref.run("clean up", timeout=BOUND)
        assert result.suspended
        if answer is not None:
            (request,) = result.requests
            assert ref.resume({request.id: answer}).status == "completed"
        return store.load("s")


def cancelled() -> StoredSession:
    """A run cancelled while its tool works, and steered just before."""
    started = threading.Event()

    @tool
    def work(ctx: RunContext[Any]) -> str:
        """Work until cancelled."""
        started.set()
        ctx.cancellation.wait(BOUND)
        return "stopped"

    agent = Agent("worker", model=ScriptedModel([call("work"), "never"]), tools=[work])
    with MemoryStore() as store, Runtime(clock=clock()) as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s")
        future = ref.run_async("work hard")
        assert started.wait(BOUND)
        ref.send("and hurry")
        ref.cancel("user left")
        assert future.result(BOUND).status == "cancelled"
        return store.load("s")


def session_of(agent: Agent[Any], prompt: str, **spawn: Any) -> StoredSession:
    """``agent`` run once on ``prompt`` into a fresh store (failures are part of the log)."""
    with MemoryStore() as store, Runtime(clock=clock()) as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s", **spawn)
        with contextlib.suppress(RunError):  # a failed run is logged too: the test reads that
            ref.run(prompt, timeout=BOUND)
        return store.load("s")
