"""The conformance suite of `SessionStore`: every implementation runs it.

Subclass `StoreConformance` in a test module and say how to make a store; pytest then runs
every test of the suite against it::

    from actors.store import SQLiteStore
    from actors.store.conformance import StoreConformance

    class TestSQLiteStore(StoreConformance):
        def make_store(self, tmp_path):
            return SQLiteStore(tmp_path / "sessions.db")

        def make_peer(self, store, tmp_path):
            return SQLiteStore(store.path)

The suite needs pytest (it is not imported by `actors.store` itself). Each test gets a new store
from `StoreConformance.make_store` and closes it afterwards; the tests of session ownership
open a second instance on the same sessions with `StoreConformance.make_peer`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actors.context._agent_context import AgentContext
from actors.context._events import Event
from actors.exceptions import SessionBusyError, SessionNotFoundError, StoreError, UserError
from actors.store._conformance_base import EPOCH, counting_clock, sample_context
from actors.store._conformance_blobs import BlobConformance, screenshot
from actors.store._conformance_budgets import BudgetConformance
from actors.store._conformance_fencing import FencingConformance
from actors.store._conformance_forks import ForkConformance
from actors.store._conformance_ownership import OwnershipConformance
from actors.store._conformance_snapshots import SnapshotConformance
from actors.store._protocol import SessionStore, begin_session
from actors.store._records import AgentRecord

__all__ = ["StoreConformance", "counting_clock", "sample_context", "screenshot"]


class StoreConformance(
    OwnershipConformance,
    FencingConformance,
    SnapshotConformance,
    ForkConformance,
    BudgetConformance,
    BlobConformance,
):
    """Tests every `SessionStore` must pass. Subclass it; implement `make_store` and `make_peer`.

    A store that keeps the content of binary parts outside its events also implements
    `stored_payloads` and `stored_blob_count`, so the suite checks it is stored once.

    The test class's name must start with ``Test`` for pytest to collect it.
    """

    # -- sessions ---------------------------------------------------------------------------

    def test_is_a_session_store(self, store: SessionStore) -> None:
        """The store satisfies the `SessionStore` protocol."""
        assert isinstance(store, SessionStore)

    def test_create_session_then_load(self, store: SessionStore) -> None:
        """A new session loads with its root, its data, UTC timestamps and no agents."""
        store.create_session("s1", root_agent_id="root", data={"spec": "assistant", "n": 1})
        loaded = store.load("s1")
        assert (loaded.session_id, loaded.root_agent_id) == ("s1", "root")
        assert loaded.data == {"spec": "assistant", "n": 1}
        assert loaded.agents == ()
        assert loaded.created_at.utcoffset() == timedelta(0)
        assert loaded.updated_at >= loaded.created_at

    def test_create_session_without_data(self, store: SessionStore) -> None:
        """Omitted data loads as an empty mapping."""
        store.create_session("s1", root_agent_id="root")
        assert store.load("s1").data == {}

    def test_create_session_is_idempotent(self, store: SessionStore) -> None:
        """Creating a session again with the same root changes nothing."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 3))
        store.create_session("s1", root_agent_id="root", data={"spec": "other"})
        loaded = store.load("s1")
        assert loaded.data == {"spec": "assistant"}
        assert len(loaded.agents[0].context["events"]) == 3
        assert [info.session_id for info in store.list_sessions()] == ["s1"]

    def test_create_session_with_another_root_is_refused(self, store: SessionStore) -> None:
        """A session id is bound to its root agent; the error names the session."""
        store.create_session("s1", root_agent_id="root")
        with pytest.raises(StoreError, match="s1"):
            store.create_session("s1", root_agent_id="other")
        assert store.load("s1").root_agent_id == "root"

    def test_create_session_refuses_bad_arguments(self, store: SessionStore) -> None:
        """Empty ids and data that is not plain JSON are caller errors; nothing is created."""
        with pytest.raises(UserError):
            store.create_session("", root_agent_id="root")
        with pytest.raises(UserError):
            store.create_session("s1", root_agent_id="")
        with pytest.raises(UserError):
            store.create_session("s1", root_agent_id="root", data={"when": datetime.now(UTC)})
        assert store.list_sessions() == []

    def test_session_data_is_copied(self, store: SessionStore) -> None:
        """Changing the data after the call, or a loaded copy, does not change the store."""
        data: dict[str, Any] = {"tags": ["a"]}
        store.create_session("s1", root_agent_id="root", data=data)
        data["tags"].append("b")
        store.load("s1").data["tags"].append("c")
        assert store.load("s1").data == {"tags": ["a"]}

    def test_begin_session_claims_creates_and_puts_the_root(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """One call: the session exists with its data and root record, held by the caller."""
        root = AgentRecord("root", None, "assistant", "idle")
        assert begin_session(store, "s1", root, data={"agent": "assistant"}, acquire=True)
        loaded = store.load("s1")
        assert (loaded.root_agent_id, loaded.data) == ("root", {"agent": "assistant"})
        assert [a.record for a in loaded.agents] == [root]
        with pytest.raises(SessionBusyError):
            peer.append_events("s1", "root", self._events("root", 0, 1))
        store.append_events("s1", "root", self._events("root", 0, 2))
        store.release("s1")
        peer.append_events("s1", "root", self._events("root", 2, 1))

    def test_begin_session_leaves_a_root_with_a_log_alone(self, store: SessionStore) -> None:
        """A root that has events is not overwritten: False, and the stored session stays."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        before = store.load("s1")
        again = AgentRecord("root", None, "assistant", "finished")
        assert not begin_session(store, "s1", again, data={"agent": "other"})
        assert store.load("s1") == before

    def test_begin_session_puts_a_root_without_events(self, store: SessionStore) -> None:
        """An existing session whose root logged nothing yet gets the new record: True."""
        self._session(store)
        record = AgentRecord("root", None, "assistant", "running")
        assert begin_session(store, "s1", record)
        assert [a.record for a in store.load("s1").agents] == [record]

    def test_begin_session_refuses_another_root_and_busy_sessions(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Another root, or a session held elsewhere, raise and write nothing."""
        store.create_session("s1", root_agent_id="root")
        with pytest.raises(StoreError, match="s1"):
            begin_session(store, "s1", AgentRecord("other", None, "assistant", "idle"))
        assert store.load("s1").agents == ()
        peer.acquire("s2")
        with pytest.raises(SessionBusyError):
            begin_session(store, "s2", AgentRecord("root", None, "a", "idle"), acquire=True)
        assert [info.session_id for info in store.list_sessions()] == ["s1"]
        with pytest.raises(UserError):
            begin_session(store, "", AgentRecord("root", None, "a", "idle"))

    # -- agents -----------------------------------------------------------------------------

    def test_put_agent_inserts_then_updates(self, store: SessionStore) -> None:
        """Putting an agent again updates its record in place."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        store.put_agent("s1", AgentRecord("root", None, "spec", "running", 0))
        store.put_agent("s1", AgentRecord("root", None, "spec", "suspended", 0))
        (agent,) = store.load("s1").agents
        assert agent.record == AgentRecord("root", None, "spec", "suspended", 0)
        assert len(agent.context["events"]) == 2

    def test_agents_load_in_spawn_order(self, store: SessionStore) -> None:
        """Agents load sorted by position; equal positions keep the order of their first put."""
        store.create_session("s1", root_agent_id="root")
        store.put_agent("s1", AgentRecord("c", "root", "spec", "idle", 2))
        store.put_agent("s1", AgentRecord("root", None, "spec", "idle", 0))
        store.put_agent("s1", AgentRecord("b", "root", "spec", "idle", 1))
        store.put_agent("s1", AgentRecord("a", "root", "spec", "idle", 1))
        store.put_agent("s1", AgentRecord("b", "root", "spec", "finished", 1))
        loaded = store.load("s1")
        assert [agent.agent_id for agent in loaded.agents] == ["root", "b", "a", "c"]
        assert loaded.agent("b").record.status == "finished"
        assert loaded.agents[1].context["parent_id"] == "root"

    def test_put_agent_refuses_what_is_not_a_record(self, store: SessionStore) -> None:
        """put_agent takes an AgentRecord."""
        store.create_session("s1", root_agent_id="root")
        with pytest.raises(UserError):
            store.put_agent("s1", {"agent_id": "root"})  # type: ignore[arg-type]

    # -- appending and loading --------------------------------------------------------------

    def test_append_and_load_roundtrip(self, store: SessionStore) -> None:
        """Loaded contexts hold the same events and deserialize to the same state."""
        ctx = sample_context("root")
        child = sample_context("root-sub-1", parent_id="root")
        store.create_session("s1", root_agent_id="root")
        store.put_agent("s1", AgentRecord("root", None, ctx.name, "suspended", 0))
        store.put_agent("s1", AgentRecord("root-sub-1", "root", child.name, "idle", 1))
        events = ctx.events
        store.append_events("s1", "root", events[:5])
        store.append_events("s1", "root-sub-1", child.events)
        store.append_events("s1", "root", events[5:])

        loaded = store.load("s1")
        root, sub = loaded.agents
        assert root.context["version"] == 2
        assert root.context["events"] == [event.model_dump(mode="json") for event in events]
        restored = AgentContext.deserialize(root.context)
        assert restored.events == events
        assert (restored.agent_id, restored.name, restored.parent_id) == ("root", "root-spec", None)
        assert restored.messages == ctx.messages
        assert restored.metadata == ctx.metadata
        assert restored.usage == ctx.usage
        assert restored.suspended == ctx.suspended
        assert restored.run_id == ctx.run_id
        restored_child = AgentContext.deserialize(sub.context)
        assert restored_child.parent_id == "root"
        assert restored_child.events == child.events

    def test_agent_without_events_loads_an_empty_log(self, store: SessionStore) -> None:
        """A put agent with no events yet loads as an empty context."""
        self._session(store)
        (agent,) = store.load("s1").agents
        assert agent.context["events"] == []
        assert AgentContext.deserialize(agent.context).messages == []

    def test_loaded_contexts_are_fresh_copies(self, store: SessionStore) -> None:
        """Changing a loaded blob, or the events after appending, does not change the store."""
        self._session(store)
        events = self._events("root", 0, 2)
        store.append_events("s1", "root", events)
        events[0].data["tag"] = "changed"
        store.load("s1").agents[0].context["events"].clear()
        assert store.load("s1").agents[0].context["events"][0]["data"]["tag"] == ""

    def test_last_seq(self, store: SessionStore) -> None:
        """last_seq is -1 for an empty log (or an agent never put), else the highest seq."""
        self._session(store, "s1", "root", "child")
        assert store.last_seq("s1", "root") == -1
        assert store.last_seq("s1", "nobody") == -1
        store.append_events("s1", "root", self._events("root", 0, 4))
        assert store.last_seq("s1", "root") == 3
        assert store.last_seq("s1", "child") == -1

    def test_empty_batch_writes_nothing(self, store: SessionStore) -> None:
        """An empty batch is accepted and changes nothing."""
        self._session(store)
        store.append_events("s1", "root", [])
        assert store.last_seq("s1", "root") == -1

    def test_first_event_must_have_seq_zero(self, store: SessionStore) -> None:
        """A log starts at seq 0."""
        self._session(store)
        with pytest.raises(StoreError, match="root"):
            store.append_events("s1", "root", self._events("root", 1, 3))
        assert store.last_seq("s1", "root") == -1

    def test_gap_after_the_stored_log_is_refused(self, store: SessionStore) -> None:
        """A batch must continue the stored log; nothing of a batch after a gap is written."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 3))
        with pytest.raises(StoreError, match="missing"):
            store.append_events("s1", "root", self._events("root", 4, 3))
        assert store.last_seq("s1", "root") == 2

    def test_gap_inside_a_batch_is_refused(self, store: SessionStore) -> None:
        """A batch must be contiguous; nothing of it is written otherwise."""
        self._session(store)
        batch = [*self._events("root", 0, 2), *self._events("root", 3, 2)]
        with pytest.raises(StoreError, match="contiguous"):
            store.append_events("s1", "root", batch)
        repeated = [*self._events("root", 0, 2), *self._events("root", 1, 1)]
        with pytest.raises(StoreError, match="contiguous"):
            store.append_events("s1", "root", repeated)
        assert store.last_seq("s1", "root") == -1

    def test_identical_reappend_is_skipped(self, store: SessionStore) -> None:
        """Re-appending stored events (after a crash) is harmless; the new tail is written."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 5))
        before = store.load("s1")
        store.append_events("s1", "root", self._events("root", 0, 5))
        assert store.load("s1").agents == before.agents
        store.append_events("s1", "root", self._events("root", 3, 5))
        events = store.load("s1").agents[0].context["events"]
        assert [event["seq"] for event in events] == list(range(8))
        assert store.list_sessions()[0].event_count == 8

    def test_reappend_compares_type_and_data_not_time(self, store: SessionStore) -> None:
        """An event re-created with a new timestamp but the same content is the same event."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        again = [e.model_copy(update={"created_at": EPOCH}) for e in self._events("root", 0, 2)]
        store.append_events("s1", "root", again)
        assert store.last_seq("s1", "root") == 1

    def test_conflicting_reappend_is_refused(self, store: SessionStore) -> None:
        """A different event at a stored seq is refused and nothing of its batch is written."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 5))
        before = store.load("s1")
        conflicting = [*self._events("root", 3, 1), *self._events("root", 4, 3, tag="other")]
        with pytest.raises(StoreError, match="seq 4"):
            store.append_events("s1", "root", conflicting)
        retyped = [self._events("root", 4, 1)[0].model_copy(update={"type": "app.other"})]
        with pytest.raises(StoreError, match="seq 4"):
            store.append_events("s1", "root", retyped)
        after = store.load("s1")
        assert after.agents == before.agents
        assert store.last_seq("s1", "root") == 4
        assert store.list_sessions()[0].event_count == 5

    def test_append_refuses_bad_events(self, store: SessionStore) -> None:
        """Items that are not events, or payloads that are not JSON, are caller errors."""
        self._session(store)
        with pytest.raises(UserError):
            store.append_events("s1", "root", [{"seq": 0}])  # type: ignore[list-item]
        bad = Event(seq=0, type="app.x", data={"at": datetime.now(UTC)}, created_at=EPOCH)
        with pytest.raises(UserError, match="seq 0"):
            store.append_events("s1", "root", [bad])
        assert store.last_seq("s1", "root") == -1

    def test_append_for_an_agent_never_put_is_refused(self, store: SessionStore) -> None:
        """Events belong to an agent of the session: put_agent comes first."""
        self._session(store)
        with pytest.raises(StoreError, match="put_agent"):
            store.append_events("s1", "ghost", self._events("ghost", 0, 1))

    def test_append_with_a_record_puts_the_agent_with_its_events(self, store: SessionStore) -> None:
        """A new agent and its first events, then a status and its events, in one call each."""
        store.create_session("s1", root_agent_id="root")
        store.append_events(
            "s1",
            "root",
            self._events("root", 0, 2),
            record=AgentRecord("root", None, "assistant", "running"),
        )
        store.append_events(
            "s1",
            "root",
            self._events("root", 2, 2),
            record=AgentRecord("root", None, "assistant", "idle"),
        )
        (agent,) = store.load("s1").agents
        assert agent.record.status == "idle"
        assert [e["seq"] for e in agent.context["events"]] == [0, 1, 2, 3]

    def test_a_refused_append_puts_no_record(self, store: SessionStore) -> None:
        """A batch refused (a gap here) leaves the agent's record as it was, or absent."""
        store.create_session("s1", root_agent_id="root")
        with pytest.raises(StoreError):
            store.append_events(
                "s1",
                "root",
                self._events("root", 3, 1),
                record=AgentRecord("root", None, "assistant", "running"),
            )
        assert store.load("s1").agents == ()
        store.put_agent("s1", AgentRecord("root", None, "assistant", "idle"))
        with pytest.raises(StoreError):
            store.append_events(
                "s1",
                "root",
                self._events("root", 3, 1),
                record=AgentRecord("root", None, "assistant", "failed"),
            )
        assert store.load("s1").agents[0].record.status == "idle"

    def test_append_with_another_agents_record_is_refused(self, store: SessionStore) -> None:
        """The record given to append_events must be the appending agent's own."""
        self._session(store)
        with pytest.raises(UserError, match="record of agent 'other'"):
            store.append_events(
                "s1",
                "root",
                self._events("root", 0, 1),
                record=AgentRecord("other", None, "x", "idle"),
            )
        assert store.last_seq("s1", "root") == -1

    def test_logs_are_per_session_and_agent(self, store: SessionStore) -> None:
        """The same agent id in two sessions has two independent logs."""
        self._session(store, "s1")
        self._session(store, "s2")
        store.append_events("s1", "root", self._events("root", 0, 3))
        store.append_events("s2", "root", self._events("root", 0, 1, tag="s2"))
        assert store.last_seq("s1", "root") == 2
        assert store.last_seq("s2", "root") == 0
        assert store.load("s2").agents[0].context["events"][0]["data"]["tag"] == "s2"

    # -- listing and deleting ---------------------------------------------------------------

    def test_list_sessions_newest_first_with_counts(self, store: SessionStore) -> None:
        """Sessions list the most recently created first, with agent and event counts."""
        assert store.list_sessions() == []
        self._session(store, "old", "root")
        self._session(store, "mid", "r", "c1", "c2")
        self._session(store, "new", "root")
        store.append_events("old", "root", self._events("root", 0, 4))
        store.append_events("mid", "c1", self._events("c1", 0, 2))
        store.append_events("mid", "c2", self._events("c2", 0, 3))
        infos = store.list_sessions()
        assert [info.session_id for info in infos] == ["new", "mid", "old"]
        assert [(info.agent_count, info.event_count) for info in infos] == [(1, 0), (3, 5), (1, 4)]
        mid = infos[1]
        assert (mid.root_agent_id, mid.data) == ("r", {"spec": "assistant"})
        assert mid.updated_at >= mid.created_at

    def test_delete(self, store: SessionStore) -> None:
        """Delete removes a session with its agents and events, and nothing else."""
        self._session(store, "s1")
        self._session(store, "s2")
        store.append_events("s1", "root", self._events("root", 0, 3))
        store.append_events("s2", "root", self._events("root", 0, 2))
        store.delete("s1")
        assert [info.session_id for info in store.list_sessions()] == ["s2"]
        with pytest.raises(SessionNotFoundError):
            store.load("s1")
        assert store.last_seq("s2", "root") == 1
        self._session(store, "s1")  # the id is free again, with an empty log
        assert store.last_seq("s1", "root") == -1

    def test_unknown_session(self, store: SessionStore) -> None:
        """Every call on a session that does not exist raises SessionNotFoundError naming it."""
        calls: list[Callable[[], object]] = [
            lambda: store.load("nope"),
            lambda: store.delete("nope"),
            lambda: store.last_seq("nope", "root"),
            lambda: store.put_agent("nope", AgentRecord("root", None, "spec", "idle")),
            lambda: store.append_events("nope", "root", self._events("root", 0, 1)),
            lambda: store.append_events("nope", "root", []),
        ]
        for call in calls:
            with pytest.raises(SessionNotFoundError, match="nope") as caught:
                call()
            assert isinstance(caught.value, StoreError)
            assert isinstance(caught.value, KeyError)

    # -- threads and lifetime ---------------------------------------------------------------

    def test_concurrent_appends_from_eight_threads(self, store: SessionStore) -> None:
        """Eight threads appending to their own agents, while another reads, lose nothing."""
        agents = [f"agent-{n}" for n in range(8)]
        self._session(store, "s1", *agents)
        batches, size = 25, 4
        start = threading.Barrier(len(agents) + 1)
        errors: list[BaseException] = []
        done = threading.Event()

        def write(agent_id: str) -> None:
            try:
                start.wait()
                for batch in range(batches):
                    store.append_events("s1", agent_id, self._events(agent_id, batch * size, size))
            except BaseException as exc:  # reported below: a thread cannot fail the test
                errors.append(exc)

        def read() -> None:
            try:
                start.wait()
                while not done.is_set():
                    store.load("s1")
                    store.list_sessions()
            except BaseException as exc:  # reported below
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(agent_id,)) for agent_id in agents]
        reader = threading.Thread(target=read)
        for thread in [*writers, reader]:
            thread.start()
        for thread in writers:
            thread.join(timeout=30)
        done.set()
        reader.join(timeout=30)
        assert errors == []
        loaded = store.load("s1")
        for stored in loaded.agents:
            events = stored.context["events"]
            assert [event["seq"] for event in events] == list(range(batches * size))
            assert {event["data"]["agent"] for event in events} == {stored.agent_id}
        assert store.list_sessions()[0].event_count == len(agents) * batches * size

    def test_close_is_idempotent_and_final(self, tmp_path: Path) -> None:
        """After close, every call raises StoreError; closing again is harmless."""
        store = self.make_store(tmp_path)
        self._session(store)
        store.close()
        store.close()
        with pytest.raises(StoreError):
            store.load("s1")
        with pytest.raises(StoreError):
            store.list_sessions()
        with pytest.raises(StoreError):
            store.create_session("s2", root_agent_id="root")

    def test_context_manager_closes(self, tmp_path: Path) -> None:
        """A store used in a with block is closed when the block ends."""
        with self.make_store(tmp_path) as store:
            self._session(store)
        with pytest.raises(StoreError):
            store.list_sessions()
