"""Waking an agent from a snapshot of its fold: cheap, and the same as folding its whole log."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from actors import Agent, Answer, Pending, Request, RunContext, Runtime, tool
from actors.context._agent_context import AgentContext
from actors.context._snapshot import SNAPSHOT_VERSION
from actors.exceptions import StoreError, UserError
from actors.store import SessionStore, SQLiteStore
from actors.testing import ScriptedModel, call

BOUND = 30.0


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "sessions.db") as sqlite:
            yield sqlite
        return
    from actors.store import PostgresStore

    dsn = request.getfixturevalue("postgres_dsn")
    with PostgresStore(dsn, schema=f"t_{secrets.token_hex(6)}") as postgres:
        yield postgres


class Reads:
    """What the runtime reads of a store: each load's events per agent, each range read."""

    def __init__(self, store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loads: list[tuple[bool, list[int]]] = []
        self.ranges: list[tuple[int, int | None]] = []
        load, read_events = store.load, store.read_events

        def spy_load(session_id: str, *, snapshots: bool = False) -> Any:
            loaded = load(session_id, snapshots=snapshots)
            self.loads.append((snapshots, [len(a.context["events"]) for a in loaded.agents]))
            return loaded

        def spy_read(session_id: str, agent_id: str, *, start: int = 0, stop: Any = None) -> Any:
            self.ranges.append((start, stop))
            return read_events(session_id, agent_id, start=start, stop=stop)

        monkeypatch.setattr(store, "load", spy_load)
        monkeypatch.setattr(store, "read_events", spy_read)


def _chat(replies: int = 200) -> Agent[Any]:
    return Agent("chat", model=ScriptedModel([f"r{n}" for n in range(replies)], per_agent=True))


def _whole_fold(store: SessionStore, session_id: str, agent_id: str) -> AgentContext:
    return AgentContext.deserialize(store.load(session_id).agent(agent_id).context)


def test_a_long_session_wakes_from_its_snapshot_without_reading_its_log(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runtime(snapshot_every=1000) as rt:  # only passivation writes one here
        ref = rt.spawn(_chat(), store=store, session_id="s1")
        for n in range(30):
            ref.run(f"m{n}", timeout=BOUND)
        logged = ref.context().event_count
        assert ref.passivate()
        snapshot = store.load("s1", snapshots=True).agent(ref.agent_id).snapshot
        assert snapshot is not None
        assert snapshot["folded"] == logged
        reads = Reads(store, monkeypatch)
        result = ref.run("after the sleep", timeout=BOUND)
        assert result.output == "r30"
        assert reads.loads == [(True, [1])]  # the snapshot's own event, nothing before it
        assert reads.ranges == []
        assert [m.content for m in result.messages][-4:] == ["m29", "r29", "after the sleep", "r30"]
        assert len(result.messages) == 62
        # The whole log is still there for whoever asks: read once, on demand.
        events = ref.context().events
        assert [e.seq for e in events] == list(range(len(events)))
        assert reads.ranges == [(0, logged)]
        whole = _whole_fold(store, "s1", ref.agent_id)
        assert ref.context().entries == whole.entries
        assert ref.context().usage == whole.usage


def test_a_snapshot_that_does_not_fit_is_ignored_and_rebuilt(store: SessionStore) -> None:
    with Runtime(snapshot_every=40) as rt:
        ref = rt.spawn(_chat(), store=store, session_id="s1")
        for n in range(10):
            ref.run(f"m{n}", timeout=BOUND)
        assert ref.passivate()
        good = store.load("s1", snapshots=True).agent(ref.agent_id).snapshot
        assert good is not None
        # Damaged: it claims to be of the event before the one it was taken at.
        store.put_snapshot("s1", ref.agent_id, {**good, "seq": 3, "folded": 3})
        with capture_logs() as logs:
            result = ref.run("again", timeout=BOUND)
        assert result.output == "r10"
        assert len(result.messages) == 22
        assert any(e["event"] == "snapshot ignored" for e in logs)
        rebuilt = store.load("s1", snapshots=True).agent(ref.agent_id).snapshot
        assert rebuilt is not None
        assert rebuilt["version"] == SNAPSHOT_VERSION
        assert rebuilt["folded"] > good["folded"]  # written again from the whole fold
        assert ref.passivate()
        assert ref.run("once more", timeout=BOUND).output == "r11"


def test_an_older_snapshot_and_the_events_after_it_wake_the_agent_as_they_were(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A crash (or a failed write) between appending events and writing the next snapshot
    # leaves an older snapshot: it still fits, and the events after it are folded on top.
    with Runtime(snapshot_every=1000) as rt:
        ref = rt.spawn(_chat(), store=store, session_id="s1")
        for n in range(12):
            ref.run(f"m{n}", timeout=BOUND)
        assert ref.passivate()
        older = store.load("s1", snapshots=True).agent(ref.agent_id).snapshot
        for n in range(12, 20):
            ref.run(f"m{n}", timeout=BOUND)

        def refused(*args: Any, **kwargs: Any) -> None:
            raise StoreError("the disk is full")

        monkeypatch.setattr(store, "put_snapshot", refused)
        assert ref.passivate()  # the snapshot is not written; the log is
        monkeypatch.undo()
        assert store.load("s1", snapshots=True).agent(ref.agent_id).snapshot == older
        result = ref.run("after", timeout=BOUND)
        assert result.output == "r20"
        assert [m.content for m in result.messages][-3:] == ["r19", "after", "r20"]
        assert ref.context().entries == _whole_fold(store, "s1", ref.agent_id).entries


def test_a_session_restored_after_a_crash_keeps_waking_from_snapshots(
    store: SessionStore,
) -> None:
    with Runtime(snapshot_every=30) as rt:
        ref = rt.spawn(_chat(), store=store, session_id="s1")
        for n in range(8):
            ref.run(f"m{n}", timeout=BOUND)
        agent_id = ref.agent_id
    # The runtime went away without passivating: the stored snapshot is older than the log.
    with Runtime(snapshot_every=1000) as rt:
        ref = rt.restore("s1", store=store, agents=[_chat()])
        assert ref.passivate()
        result = ref.run("back", timeout=BOUND)
        assert result.output == "r8"
        assert len(result.messages) == 18
        assert ref.context().entries == _whole_fold(store, "s1", agent_id).entries


@tool
def confirm(ctx: RunContext[Any], what: str) -> str:
    """Ask before doing it."""
    if ctx.answer is None:
        return Pending(Request(kind="confirm", prompt=f"{what}?"))  # type: ignore[return-value]
    return "done" if ctx.answer.ok else "refused"


def test_a_suspended_run_resumes_after_waking_from_a_snapshot(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [*(f"r{n}" for n in range(20)), call("confirm", what="send"), "sent"]
    spec = Agent("chat", model=ScriptedModel(replies, per_agent=True), tools=[confirm])
    with Runtime(snapshot_every=25) as rt:
        ref = rt.spawn(spec, store=store, session_id="s1")
        for n in range(20):
            ref.run(f"m{n}", timeout=BOUND)
        waiting = ref.run("send it", timeout=BOUND)
        assert waiting.status == "suspended"
        assert ref.passivate()
        reads = Reads(store, monkeypatch)
        result = ref.resume({waiting.requests[0].id: Answer(ok=True)}, timeout=BOUND)
        assert (result.status, result.output) == ("completed", "sent")
        assert reads.ranges == []  # the open turn came with the snapshot
        assert reads.loads[0][0] is True
        assert reads.loads[0][1][0] < 15
        assert ref.context().entries == _whole_fold(store, "s1", ref.agent_id).entries


def test_with_snapshots_off_none_is_written_or_read(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runtime(snapshot_every=5) as rt:
        ref = rt.spawn(_chat(), store=store, session_id="s1")
        for n in range(10):
            ref.run(f"m{n}", timeout=BOUND)
        agent_id = ref.agent_id
    written = store.load("s1", snapshots=True).agent(agent_id).snapshot
    with Runtime(snapshot_every=None) as rt:
        ref = rt.restore("s1", store=store, agents=[_chat()])
        assert ref.passivate()
        reads = Reads(store, monkeypatch)
        assert ref.run("back", timeout=BOUND).output == "r10"
        assert reads.loads == [(False, [reads.loads[0][1][0]])]  # the whole log
        assert reads.loads[0][1][0] > 80
    assert store.load("s1", snapshots=True).agent(agent_id).snapshot == written


def test_snapshot_every_is_checked() -> None:
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(UserError, match="snapshot_every"):
            Runtime(snapshot_every=bad)  # type: ignore[arg-type]
