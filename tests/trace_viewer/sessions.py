"""Sessions for the trace tests, made by running real agents offline into a store."""

from __future__ import annotations

import contextlib
import functools
import struct
import threading
import zlib
from datetime import timedelta
from typing import Any

from actors import (
    Agent,
    Answer,
    AssistantMessage,
    Event,
    Message,
    RunContext,
    Runtime,
    ToolCall,
    ToolResultMessage,
    tool,
)
from actors.cli._demo_team import DEMO_QUESTION, DemoContext, build_team
from actors.exceptions import RunError
from actors.store import AgentRecord, MemoryStore, SessionStore, StoredSession
from actors.testing import FakeClock, FunctionModel, ScriptedModel, call

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


def _busy(steps: int, calls: int) -> FunctionModel:
    """A model that makes ``steps`` requests of ``calls`` parallel lookups each, then answers."""

    def reply(messages: list[Message], _tools: object) -> object:
        done = sum(isinstance(m, ToolResultMessage) for m in messages)
        if done >= steps * calls:
            return f"looked up {done} things"
        return AssistantMessage(
            content=f"step {done // calls + 1}: looking up {calls} more things",
            tool_calls=tuple(
                ToolCall(id=f"lookup-{done + i}", name="lookup", arguments={"key": f"k{done + i}"})
                for i in range(calls)
            ),
        )

    return FunctionModel(reply)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"{key}: " + "a plausible paragraph of text that a tool might return. " * 3


def big_session(
    store: SessionStore, events: int = 10_000, session_id: str = "big"
) -> StoredSession:
    """A tree of a lead and four workers whose logs hold about ``events`` events in all.

    Each worker makes model requests of four parallel tool calls: 13 events a step.
    """
    steps = max(events // (4 * 13), 1)
    worker = Agent("worker", model=_busy(steps, 4), tools=[lookup], max_iterations=steps + 1)
    lead = Agent(
        "lead",
        model=ScriptedModel(
            [call("worker", task=f"part {i}") for i in range(4)] + ["all parts done"]
        ),
        subagents=[worker],
    )
    with Runtime() as runtime:
        ref = runtime.spawn(lead, store=store, session_id=session_id)
        assert ref.run("look everything up", timeout=120).status == "completed"
    return store.load(session_id)


def png(width: int, height: int) -> bytes:
    """A valid PNG of ``width`` x ``height`` grey pixels."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    rows = b"".join(
        b"\x00" + bytes([(x * 255) // width for x in range(width)]) for _ in range(height)
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@functools.cache
def with_parts() -> tuple[StoredSession, dict[str, Any]]:
    """The recorder's session, its prompt replaced by one with parts, and those parts.

    The prompt holds a small screenshot (a real 400x300 PNG) twice, a 3 MB image and a 20 MB
    PDF (as an application would send them once the loop takes parts). Made once per process
    (the big parts take seconds to check on each way through the store): do not change it.
    """
    from actors import DocumentPart, ImagePart, UserMessage

    small = ImagePart(data=png(400, 300), media_type="image/png")
    large = ImagePart(data=b"\x89PNG\r\n\x1a\n" + bytes(3_000_000), media_type="image/png")
    pdf = DocumentPart(
        data=b"%PDF-1.4\n" + bytes(20_000_000), media_type="application/pdf", name="big.pdf"
    )
    prompt = UserMessage(content=["record a", small, small, large, pdf])
    with MemoryStore() as finished, Runtime(clock=clock()) as runtime:
        runtime.spawn(recorder(), store=finished, session_id="s").run("record a", timeout=BOUND)
        events = [Event.model_validate(e) for e in finished.load("s").agents[0].context["events"]]
    events = [
        e.model_copy(update={"data": prompt.model_dump(mode="json")})
        if e.type == "user_message"
        else e
        for e in events
    ]
    with MemoryStore() as store:
        store.create_session("s", root_agent_id="recorder")
        store.put_agent("s", AgentRecord("recorder", None, "recorder", "idle"))
        store.append_events("s", "recorder", events)
        return store.load("s"), {"small": small, "large": large, "pdf": pdf}
