"""The conformance tests of snapshots: `SessionStore.put_snapshot`, `read_events`, `load`."""

from __future__ import annotations

import pytest

from actors.exceptions import SessionBusyError, SessionNotFoundError, StoreError, UserError
from actors.store._conformance_base import ConformanceBase
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["SnapshotConformance"]


class SnapshotConformance(ConformanceBase):
    """Tests of snapshots and partial reads of a log; part of `StoreConformance`."""

    def test_read_events_reads_a_range_of_one_log(self, store: SessionStore) -> None:
        """``start <= seq < stop``, in order, as a loaded context holds them."""
        self._session(store, "s1", "root", "child")
        store.append_events("s1", "root", self._events("root", 0, 6))
        store.append_events("s1", "child", self._events("child", 0, 2))
        whole = store.load("s1").agent("root").context["events"]
        assert store.read_events("s1", "root") == whole
        assert store.read_events("s1", "root", start=2) == whole[2:]
        assert store.read_events("s1", "root", start=1, stop=4) == whole[1:4]
        assert store.read_events("s1", "root", start=9) == []
        assert store.read_events("s1", "nobody") == []
        with pytest.raises(SessionNotFoundError):
            store.read_events("missing", "root")
        with pytest.raises(UserError):
            store.read_events("s1", "root", start="2")  # type: ignore[arg-type]

    def test_load_with_snapshots_reads_from_each_snapshot(self, store: SessionStore) -> None:
        """An agent with a snapshot loads it and its events from its seq; others load whole."""
        self._session(store, "s1", "root", "child")
        store.append_events("s1", "root", self._events("root", 0, 8))
        store.append_events("s1", "child", self._events("child", 0, 3))
        store.put_snapshot("s1", "root", {"seq": 5, "state": {"n": [1, 2]}})
        loaded = store.load("s1", snapshots=True)
        root, child = loaded.agent("root"), loaded.agent("child")
        assert root.snapshot == {"seq": 5, "state": {"n": [1, 2]}}
        assert root.first_seq == 5
        assert [e["seq"] for e in root.context["events"]] == [5, 6, 7]
        assert root.context["events"] == store.read_events("s1", "root", start=5)
        assert (child.snapshot, child.first_seq, len(child.context["events"])) == (None, 0, 3)
        plain = store.load("s1")  # without the flag: whole logs, no snapshot
        assert plain.agent("root").snapshot is None
        assert len(plain.agent("root").context["events"]) == 8

    def test_a_snapshot_replaces_the_one_before(self, store: SessionStore) -> None:
        """One snapshot per agent: the latest written."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 4))
        store.put_snapshot("s1", "root", {"seq": 1, "v": "old"})
        store.put_snapshot("s1", "root", {"seq": 3, "v": "new"})
        loaded = store.load("s1", snapshots=True).agent("root")
        assert loaded.snapshot == {"seq": 3, "v": "new"}
        assert [e["seq"] for e in loaded.context["events"]] == [3]

    def test_a_snapshot_past_the_log_loads_no_event(self, store: SessionStore) -> None:
        """The store does not check a snapshot against the log: the runtime does."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        store.put_snapshot("s1", "root", {"seq": 7})
        loaded = store.load("s1", snapshots=True).agent("root")
        assert (loaded.snapshot, loaded.first_seq, loaded.context["events"]) == ({"seq": 7}, 7, [])

    def test_snapshot_is_copied(self, store: SessionStore) -> None:
        """Changing a snapshot after writing it, or after loading it, changes nothing stored."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 1))
        items = [1]
        store.put_snapshot("s1", "root", {"seq": 0, "items": items})
        items.append(2)
        first = store.load("s1", snapshots=True).agent("root").snapshot
        assert first == {"seq": 0, "items": [1]}
        first["items"].append(3)
        assert store.load("s1", snapshots=True).agent("root").snapshot == {"seq": 0, "items": [1]}

    def test_put_snapshot_refuses_bad_input(self, store: SessionStore) -> None:
        """No seq, a negative or non-int seq, or data that is not JSON: refused, nothing kept."""
        self._session(store)
        for bad in ({}, {"seq": -1}, {"seq": True}, {"seq": "3"}, {"seq": 0, "x": {1, 2}}, [0]):
            with pytest.raises(UserError):
                store.put_snapshot("s1", "root", bad)  # type: ignore[arg-type]
        assert store.load("s1", snapshots=True).agent("root").snapshot is None
        with pytest.raises(SessionNotFoundError):
            store.put_snapshot("missing", "root", {"seq": 0})
        with pytest.raises(StoreError):
            store.put_snapshot("s1", "nobody", {"seq": 0})

    def test_delete_removes_snapshots(self, store: SessionStore) -> None:
        """A session deleted and created again starts without the old snapshots."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 3))
        store.put_snapshot("s1", "root", {"seq": 2})
        store.delete("s1")
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 3))
        loaded = store.load("s1", snapshots=True).agent("root")
        assert (loaded.snapshot, len(loaded.context["events"])) == (None, 3)

    def test_put_snapshot_respects_the_holder(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """A session another instance holds takes no snapshot from this one."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        peer.acquire("s1")
        with pytest.raises(SessionBusyError):
            store.put_snapshot("s1", "root", {"seq": 1})
        peer.put_snapshot("s1", "root", {"seq": 1})
        assert store.load("s1", snapshots=True).agent("root").snapshot == {"seq": 1}

    def test_agent_record_survives_beside_its_snapshot(self, store: SessionStore) -> None:
        """Putting the agent again keeps its snapshot."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 2))
        store.put_snapshot("s1", "root", {"seq": 1})
        store.put_agent("s1", AgentRecord("root", None, "assistant", "finished"))
        loaded = store.load("s1", snapshots=True).agent("root")
        assert (loaded.record.status, loaded.snapshot) == ("finished", {"seq": 1})
