"""Real stored sessions for the restore fuzz test: a tree suspended three levels deep, a kept
child, a fan-out of children with tools, and a turn interrupted by a crash with a steering
message in flight."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from actors import Agent, Pending, Request, RunContext, Runtime, Subagent, tool
from actors.store import SQLiteStore
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


@tool
def note(text: str) -> str:
    """Note something.

    Args:
        text: What to note.
    """
    return text.upper()


def specs() -> list[Agent[Any]]:
    """Every spec the stored sessions use (fresh scripts: they read places from transcripts)."""
    leaf = Agent(
        "leaf",
        model=ScriptedModel([call("ask", question="color?"), "leaf saw blue"], per_agent=True),
        tools=[ask],
    )
    mid = Agent(
        "mid",
        model=ScriptedModel([call("leaf", task="t"), "mid done"], per_agent=True),
        subagents=[leaf],
    )
    deep = Agent(
        "deep",
        model=ScriptedModel([call("mid", task="t"), "root done"], per_agent=True),
        subagents=[mid],
    )
    helper = Agent("helper", model=ScriptedModel(["first", "second"], per_agent=True))
    kept = Agent(
        "kept",
        model=ScriptedModel(
            [call("helper", task="one"), "ok", call("helper", task="two"), "ok"], per_agent=True
        ),
        subagents=[Subagent(helper, keep=True)],
    )
    worker = Agent(
        "worker",
        model=ScriptedModel([call("note", text="x"), "worked"], per_agent=True),
        tools=[note],
    )
    fan = Agent(
        "fan",
        model=ScriptedModel(
            [[call("worker", task="a"), call("worker", task="b"), call("note", text="y")], "fan"],
            per_agent=True,
        ),
        tools=[note],
        subagents=[worker],
    )
    return [deep, kept, fan]


def write_sessions(path: Path) -> list[str]:
    """Store the sessions in a new SQLite file at ``path``; return their ids."""
    deep, kept, fan = specs()
    with SQLiteStore(path) as store:
        with Runtime() as runtime:
            runtime.spawn(deep, store=store, session_id="deep").run("go", timeout=10)
            runtime.spawn(kept, store=store, session_id="kept").run("go", timeout=10)
            runtime.spawn(fan, store=store, session_id="fan").run("go", timeout=10)
        started, release = threading.Event(), threading.Event()

        @tool
        def slow() -> str:
            """Block until released."""
            started.set()
            release.wait(10)
            return "late"

        crashing = Agent("crash", model=ScriptedModel([[call("slow"), call("nope")]]), tools=[slow])
        runtime = Runtime()
        try:
            ref = runtime.spawn(crashing, store=store, session_id="crash")
            ref.run_async("go")
            started.wait(10)
            ref.send("steer this way")  # logged at once; delivered by recovery after the crash
        finally:
            runtime.shutdown()  # the process "dies" with the tool in flight
            release.set()
    return ["deep", "kept", "fan", "crash"]
