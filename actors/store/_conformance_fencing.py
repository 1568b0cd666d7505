"""The conformance tests of fences: `fence` and the writes it refuses (`FencedWriteError`)."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from actors.exceptions import (
    FencedWriteError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
    UserError,
)
from actors.store._conformance_base import ConformanceBase
from actors.store._fences import fence
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["FencingConformance"]


class FencingConformance(ConformanceBase):
    """Tests of which instance may write a fenced agent; part of `StoreConformance`."""

    def test_a_fenced_agent_refuses_its_old_writer(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """After a takeover the instance that wrote before writes nothing more to the agent."""
        self._session(store, "s1", "root", "child")
        assert fence(store, "s1") == 1
        store.append_events("s1", "child", self._events("child", 0, 2))
        assert fence(peer, "s1", ["child"]) == 2  # the new host takes the child over
        writes: list[Callable[[], object]] = [
            lambda: store.append_events("s1", "child", self._events("child", 2, 1)),
            lambda: store.append_events(
                "s1",
                "child",
                self._events("child", 2, 1),
                record=AgentRecord("child", "root", "spec", "running", 1),
            ),
            lambda: store.put_agent("s1", AgentRecord("child", "root", "spec", "failed", 1)),
            lambda: store.put_snapshot("s1", "child", {"seq": 1}),
        ]
        for write in writes:
            with pytest.raises(FencedWriteError, match="child") as caught:
                write()
            assert (caught.value.session_id, caught.value.agent_id) == ("s1", "child")
            assert caught.value.epoch == 2
            assert isinstance(caught.value, StoreError)
        assert store.last_seq("s1", "child") == 1
        assert store.load("s1").agent("child").record.status == "idle"
        # The new writer goes on; the agents it did not take over stay the old one's.
        peer.append_events("s1", "child", self._events("child", 2, 1))
        store.append_events("s1", "root", self._events("root", 0, 1))
        with pytest.raises(FencedWriteError):
            peer.append_events("s1", "root", self._events("root", 1, 1))
        assert (peer.last_seq("s1", "child"), peer.last_seq("s1", "root")) == (2, 0)

    def test_fencing_every_agent_takes_the_whole_tree(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Without ids, every agent of the session is fenced, at one epoch above the last."""
        self._session(store, "s1", "root", "a", "b")
        assert fence(store, "s1", ["a"]) == 1
        assert fence(peer, "s1") == 2
        for agent_id in ("root", "a", "b"):
            with pytest.raises(FencedWriteError):
                store.append_events("s1", agent_id, self._events(agent_id, 0, 1))
            peer.append_events("s1", agent_id, self._events(agent_id, 0, 1))
        assert fence(store, "s1") == 3  # and back: epochs only grow
        store.append_events("s1", "a", self._events("a", 1, 1))
        with pytest.raises(FencedWriteError) as caught:
            peer.append_events("s1", "a", self._events("a", 1, 1))
        assert caught.value.epoch == 3
        assert store.last_seq("s1", "a") == 1

    def test_agents_nobody_fenced_stay_writable_by_all(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """A fence is per agent: other agents and sessions are written as before."""
        self._session(store, "s1", "root", "child")
        self._session(store, "s2")
        fence(peer, "s1", ["child"])
        store.append_events("s1", "root", self._events("root", 0, 1))
        peer.append_events("s1", "root", self._events("root", 1, 1))
        store.append_events("s2", "root", self._events("root", 0, 1))
        store.put_agent("s1", AgentRecord("late", "root", "spec", "idle", 2))
        assert fence(store, "s2") == 1  # epochs are counted per session
        assert (store.last_seq("s1", "root"), store.last_seq("s2", "root")) == (1, 0)

    def test_a_deleted_session_takes_its_fences_with_it(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """A session made again under the same id starts unfenced, at epoch 1."""
        self._session(store, "s1")
        fence(peer, "s1")
        peer.delete("s1")
        self._session(store, "s1")
        store.append_events("s1", "root", self._events("root", 0, 1))
        assert fence(store, "s1") == 1

    def test_fence_refuses_what_it_cannot_take(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """A missing session or agent, bad ids, a session another instance holds."""
        with pytest.raises(SessionNotFoundError):
            fence(store, "nope")
        self._session(store, "s1")
        with pytest.raises(StoreError, match="ghost"):
            fence(store, "s1", ["root", "ghost"])
        for bad in ("root", [""], [3]):
            with pytest.raises(UserError):
                fence(store, "s1", bad)  # type: ignore[arg-type]
        store.acquire("s1")
        with pytest.raises(SessionBusyError):
            fence(peer, "s1")
        assert fence(store, "s1", ["root"]) == 1  # fenced nothing before: the refusals wrote none

    def test_the_error_crosses_processes_whole(self) -> None:
        """Pickled (as between hosts), the error keeps its session, agent and epoch."""
        error = FencedWriteError("taken over", "s1", "child", 4)
        copy = pickle.loads(pickle.dumps(error))
        assert (str(copy), copy.session_id, copy.agent_id, copy.epoch) == (
            "taken over",
            "s1",
            "child",
            4,
        )
