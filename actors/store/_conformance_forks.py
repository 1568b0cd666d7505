"""The conformance tests of forks: `SessionStore.fork`, read through, and deleting the original."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors.context._events import Event
from actors.exceptions import SessionNotFoundError, StoreError, UserError
from actors.store._conformance_base import EPOCH, ConformanceBase
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["ForkConformance"]


def _timed(agent_id: str, first: int, seconds: list[int]) -> list[Event]:
    """Events of one agent numbered from ``first``, stamped at the given seconds."""
    return [
        Event(
            seq=first + i,
            type="app.step",
            data={"agent": agent_id, "n": first + i},
            created_at=EPOCH + timedelta(seconds=second),
        )
        for i, second in enumerate(seconds)
    ]


class ForkConformance(ConformanceBase):
    """Tests of forks; part of `StoreConformance`."""

    @staticmethod
    def _tree(store: SessionStore) -> None:
        """Root ``r`` stamped at seconds 0..9, children stamped at 1, 3, 5, 7 and at 6, 8."""
        store.create_session("s1", root_agent_id="r", data={"spec": "boss"})
        store.put_agent("s1", AgentRecord("r", None, "boss", "idle", 0))
        store.put_agent("s1", AgentRecord("r-sub-1", "r", "worker", "finished", 1))
        store.put_agent("s1", AgentRecord("r-sub-2", "r", "worker", "finished", 2))
        store.append_events("s1", "r", _timed("r", 0, list(range(10))))
        store.append_events("s1", "r-sub-1", _timed("r-sub-1", 0, [1, 3, 5, 7]))
        store.append_events("s1", "r-sub-2", _timed("r-sub-2", 0, [6, 8]))

    def test_a_fork_holds_the_cut_of_the_tree(self, store: SessionStore) -> None:
        """Each agent up to the root's next event; later agents left out; ids renamed."""
        self._tree(store)
        store.fork("s1", "f1", at=4, root_agent_id="f")
        fork = store.load("f1")
        original = store.load("s1")
        assert fork.root_agent_id == "f"
        assert [(a.record.agent_id, a.record.parent_id) for a in fork.agents] == [
            ("f", None),
            ("f-sub-1", "f"),
        ]
        assert fork.agent("f").context["events"] == original.agent("r").context["events"][:5]
        assert (
            fork.agent("f-sub-1").context["events"]
            == original.agent("r-sub-1").context["events"][:2]
        )
        assert fork.agent("f-sub-1").record.status == "running"  # cut short of its log
        assert fork.data["spec"] == "boss"
        assert fork.data["forked_from"] == {"session": "s1", "at": 4}
        assert store.read_events("f1", "f", start=2, stop=4) == store.read_events(
            "s1", "r", start=2, stop=4
        )
        assert (store.last_seq("f1", "f"), store.last_seq("f1", "f-sub-1")) == (4, 1)
        listed = {info.session_id: info for info in store.list_sessions()}
        assert (listed["f1"].agent_count, listed["f1"].event_count) == (2, 7)

    def test_fork_and_original_grow_apart(self, store: SessionStore) -> None:
        """A fork appends after its prefix; neither sees the other's new events."""
        self._tree(store)
        store.fork("s1", "f1", at=4, root_agent_id="f")
        store.append_events("f1", "f", _timed("f", 5, [20, 21]))
        store.append_events("f1", "f", _timed("f", 5, [20]))  # a re-append is skipped
        with pytest.raises(StoreError):
            store.append_events("f1", "f", _timed("f", 9, [22]))  # a gap
        store.append_events("s1", "r", _timed("r", 10, [30]))
        assert [e["data"]["n"] for e in store.read_events("f1", "f")] == list(range(7))
        assert store.read_events("f1", "f", start=5)[0]["created_at"].startswith("2025-01-01T")
        assert store.last_seq("s1", "r") == 10
        assert len(store.load("s1").agent("r").context["events"]) == 11

    def test_deleting_the_original_keeps_forks_whole(self, store: SessionStore) -> None:
        """A fork, and a fork of the fork, read the same after their originals are deleted."""
        self._tree(store)
        store.fork("s1", "f1", at=6, root_agent_id="f")
        store.append_events("f1", "f", _timed("f", 7, [40, 41]))
        store.fork("f1", "g1", at=7, root_agent_id="g")
        before_f, before_g = store.load("f1"), store.load("g1")
        assert [e["data"]["n"] for e in before_g.agent("g").context["events"]] == list(range(8))
        store.delete("s1")
        assert store.load("f1").agents == before_f.agents
        store.delete("f1")
        assert store.load("g1").agents == before_g.agents
        store.append_events("g1", "g", _timed("g", 8, [50]))
        assert store.last_seq("g1", "g") == 8
        assert store.last_seq("g1", "g-sub-2") == 0

    def test_fork_refuses_what_it_cannot_cut(self, store: SessionStore) -> None:
        """Missing session, taken id, an event the root has not, bad arguments."""
        self._tree(store)
        with pytest.raises(SessionNotFoundError):
            store.fork("missing", "f1", at=0, root_agent_id="f")
        with pytest.raises(UserError, match="no event 10"):
            store.fork("s1", "f1", at=10, root_agent_id="f")
        for at in (-1, "3", True):
            with pytest.raises(UserError):
                store.fork("s1", "f1", at=at, root_agent_id="f")  # type: ignore[arg-type]
        with pytest.raises(UserError):
            store.fork("s1", "s1", at=0, root_agent_id="f")
        store.fork("s1", "f1", at=0, root_agent_id="f")
        with pytest.raises(StoreError, match="exists"):
            store.fork("s1", "f1", at=0, root_agent_id="f")
        assert [a.record.agent_id for a in store.load("f1").agents] == ["f"]  # not spawned yet
        store.fork("s1", "whole", at=9, root_agent_id="w")  # the root's last: every log whole
        assert [store.last_seq("whole", a) for a in ("w", "w-sub-1", "w-sub-2")] == [9, 3, 1]
        store.fork("s1", "copy", at=None, root_agent_id="r")
        assert store.load("copy").agents == store.load("s1").agents
