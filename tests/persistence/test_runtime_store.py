"""The runtime persists every event of a tree, and restores whole trees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors import (
    Agent,
    AgentContext,
    Answer,
    Pending,
    Request,
    RunContext,
    Runtime,
    Subagent,
    tool,
)
from actors.exceptions import AgentDefinitionError, SessionNotFoundError
from actors.loop._recovery import OUTCOME_UNKNOWN
from actors.store import MemoryStore, SessionStore, SQLiteStore
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


def _stored_events(store: SessionStore, session_id: str) -> dict[str, list[tuple[int, str]]]:
    return {
        a.record.agent_id: [(e["seq"], e["type"]) for e in a.context["events"]]
        for a in store.load(session_id).agents
    }


@pytest.fixture(params=["sqlite", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "sessions.sqlite") as sqlite:
            yield sqlite
    else:
        with MemoryStore() as memory:
            yield memory


def test_every_event_of_the_tree_is_stored_before_the_result_is_reported(store: Any) -> None:
    child = Agent("child", model=ScriptedModel(["child answer"], per_agent=True))
    lead = Agent(
        "lead",
        model=ScriptedModel([[call("child", task="a"), call("child", task="b")], "done"]),
        subagents=[child],
    )
    with Runtime() as runtime:
        ref = runtime.spawn(lead, store=store, session_id="s1", metadata={"user": "ada"})
        result = ref.run("go", timeout=10)
        stored = _stored_events(store, "s1")  # read while the runtime still runs
        live = [(e.seq, e.type) for e in ref.context().events]
    assert result.completed
    assert stored["lead"] == live
    assert {(e.seq, e.type) for e in result.events} <= set(stored["lead"])
    assert set(stored) == {"lead", "lead-sub-1", "lead-sub-2"}
    records = {a.record.agent_id: a.record for a in store.load("s1").agents}
    assert records["lead-sub-1"].parent_id == "lead"
    assert records["lead-sub-1"].status == "finished"


def test_tool_context_is_never_stored(tmp_path: Path) -> None:
    secret = "sk-do-not-store-4242"
    db = tmp_path / "s.sqlite"
    agent = Agent("a", model=ScriptedModel([call("ask", question="q"), "ok"]), tools=[ask])
    with SQLiteStore(db) as store, Runtime() as runtime:
        runtime.spawn(agent, store=store, tool_context={"api_key": secret}).run("hi", timeout=10)
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes()


def test_restore_resumes_a_suspension_three_levels_deep(store: Any) -> None:
    def tree() -> Agent[Any]:
        # per_agent scripts read each agent's place from its transcript, so one script serves
        # before the "crash" and again after the restore, in a new runtime.
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
        return Agent(
            "root",
            model=ScriptedModel([call("mid", task="t"), "root done"], per_agent=True),
            subagents=[mid],
        )

    before = tree()
    with Runtime() as runtime:
        result = runtime.spawn(before, store=store, session_id="deep").run("go", timeout=10)
    assert result.suspended
    (request,) = result.requests
    assert request.path == ("root", "root-sub-1", "root-sub-1-sub-1")

    after = tree()
    with Runtime() as runtime:
        ref = runtime.restore("deep", store=store, agents=[after])
        assert [n.status for n in ref.tree().walk()] == ["suspended"] * 3
        done = ref.resume({request.id: Answer(data="blue")}, timeout=10)
    assert done.completed
    assert done.output == "root done"
    leaf_ctx = AgentContext.deserialize(store.load("deep").agents[2].context)
    assert "answer: blue" in [m.content for m in leaf_ctx.messages]


def test_restore_keeps_a_kept_child_and_its_context(store: Any) -> None:
    def lead() -> Agent[Any]:
        helper = Agent("helper", model=ScriptedModel(["first", "second"], per_agent=True))
        script = [call("helper", task="one"), "ok", call("helper", task="two"), "ok"]
        return Agent(
            "lead",
            model=ScriptedModel(script, per_agent=True),
            subagents=[Subagent(helper, keep=True)],
        )

    with Runtime() as runtime:
        runtime.spawn(lead(), store=store, session_id="kept").run("go", timeout=10)
    with Runtime() as runtime:
        ref = runtime.restore("kept", store=store, agents=[lead()])
        (child,) = ref.tree().children
        assert child.status == "idle"
        ref.run("again", timeout=10)
    helper_ctx = AgentContext.deserialize(store.load("kept").agents[1].context)
    assert [m.content for m in helper_ctx.messages if m.role == "user"] == ["one", "two"]


def test_interrupted_tool_calls_are_classified_once(store: Any) -> None:
    import threading

    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Block until released."""
        started.set()
        release.wait(10)
        return "late"

    agent = Agent(
        "a",
        model=ScriptedModel([[call("slow"), call("missing_tool_x")]]),
        tools=[slow],
        tool_retries=5,
    )
    runtime = Runtime()
    try:
        ref = runtime.spawn(agent, store=store, session_id="crash")
        ref.run_async("go")
        assert started.wait(10)
    finally:
        runtime.shutdown()  # the process "dies" with the tool in flight
        release.set()
    with Runtime() as runtime:
        restored = runtime.restore("crash", store=store, agents=[agent])
        messages = restored.context().messages
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert OUTCOME_UNKNOWN in results.values()  # slow() had started: it may have run
    events = _stored_events(store, "crash")["a"]
    assert events[-1][1] == "turn_end"
    with Runtime() as runtime:
        runtime.restore("crash", store=store, agents=[agent])
    assert _stored_events(store, "crash")["a"] == events  # idempotent


def test_restore_errors_are_typed_and_name_what_is_missing(store: Any) -> None:
    with pytest.raises(SessionNotFoundError, match="nope"), Runtime() as runtime:
        runtime.restore("nope", store=store, agents=[])
    with Runtime() as runtime:
        runtime.spawn(Agent("named", model=ScriptedModel(["x"])), store=store, session_id="s").run(
            "hi", timeout=10
        )
    with pytest.raises(AgentDefinitionError, match="named"), Runtime() as runtime:
        runtime.restore("s", store=store, agents=[Agent("other")])


def test_a_message_sent_before_a_crash_is_delivered_after_the_restore(store: Any) -> None:
    import threading

    started, release = threading.Event(), threading.Event()

    @tool
    def slow() -> str:
        """Block until released."""
        started.set()
        release.wait(10)
        return "late"

    agent = Agent("a", model=ScriptedModel([call("slow"), "ok"]), tools=[slow])
    runtime = Runtime()
    try:
        ref = runtime.spawn(agent, store=store, session_id="steer")
        ref.run_async("go")
        assert started.wait(10)
        ref.send("also check the weather")
        ref.context()  # a query after the send: the steer has been handled (and logged)
    finally:
        runtime.shutdown()
        release.set()
    with Runtime() as runtime:
        messages = runtime.restore("steer", store=store, agents=[agent]).context().messages
    assert messages[-1].role == "user"
    assert messages[-1].content == "also check the weather"


def test_streamed_deltas_reach_the_stream_and_are_never_stored(store: Any) -> None:
    from actors import (
        AssistantMessage,
        ModelRequest,
        ModelResponse,
        RunEnded,
        StreamDelta,
        TextDelta,
        Usage,
    )

    class Streaming:
        name = "streaming"

        async def request(self, request: ModelRequest) -> ModelResponse:
            assert request.on_delta is not None  # a streamed run
            for piece in ("Hel", "lo"):
                request.on_delta(StreamDelta("text", piece))
            return ModelResponse(AssistantMessage(content="Hello"), Usage(requests=1))

    seen: list[Any] = []
    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=Streaming()), store=store, session_id="stream")
        ref.subscribe(seen.append)
        streamed = list(ref.run_stream("hi"))
    ended = streamed[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    assert ended.result.output == "Hello"
    assert [d.text for d in streamed if isinstance(d, TextDelta)] == ["Hel", "lo"]
    events_seen = [(e.seq, e.type) for e in seen]  # subscribers get log events only
    assert _stored_events(store, "stream")["a"] == events_seen  # every event, and no delta


def test_subscribing_does_not_make_a_request_stream(store: Any) -> None:
    from actors import AssistantMessage, ModelRequest, ModelResponse, Usage

    asked: list[bool] = []

    class Recording:
        name = "recording"

        async def request(self, request: ModelRequest) -> ModelResponse:
            asked.append(request.on_delta is not None)
            return ModelResponse(AssistantMessage(content="ok"), Usage(requests=1))

    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=Recording()))
        ref.subscribe(lambda event: None)
        assert ref.run("hi", timeout=10).output == "ok"
    assert asked == [False]


def test_a_tool_never_runs_when_its_call_cannot_be_written() -> None:
    from actors import Event
    from actors.exceptions import RunFailedError, StoreError

    ran: list[str] = []

    class Failing(MemoryStore):
        def append_events(self, session_id: str, agent_id: str, events: Any, **kw: Any) -> None:
            if any(isinstance(e, Event) and e.type == "tool_call" for e in events):
                raise StoreError("disk full")
            super().append_events(session_id, agent_id, events, **kw)

    @tool
    def side_effect() -> str:
        """Do something irreversible."""
        ran.append("ran")
        return "done"

    agent = Agent("a", model=ScriptedModel([call("side_effect"), "ok"]), tools=[side_effect])
    with Failing() as store, Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="full")
        with pytest.raises(RunFailedError, match="could not write"):
            ref.run("go", timeout=10)
    assert ran == []
