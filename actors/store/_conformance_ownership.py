"""The conformance tests of session ownership: `SessionStore.acquire` and `release`."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.exceptions import SessionBusyError, StoreError, UserError
from actors.store._conformance_base import ConformanceBase
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

__all__ = ["OwnershipConformance"]


class OwnershipConformance(ConformanceBase):
    """Tests of who may write a session; part of `StoreConformance`."""

    def test_acquire_and_release_are_idempotent(self, store: SessionStore) -> None:
        """The holder acquires again harmlessly, writes as before, and releases twice."""
        self._session(store)
        store.acquire("s1")
        store.acquire("s1")
        store.append_events("s1", "root", self._events("root", 0, 2))
        store.release("s1")
        store.release("s1")
        store.release("never-held")
        assert store.last_seq("s1", "root") == 1

    def test_a_session_can_be_acquired_before_it_exists(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """A host claims a session id first, then creates the session."""
        store.acquire("new")
        with pytest.raises(SessionBusyError):
            peer.create_session("new", root_agent_id="root")
        self._session(store, "new")
        store.append_events("new", "root", self._events("root", 0, 1))
        assert [info.session_id for info in peer.list_sessions()] == ["new"]

    def test_a_held_session_refuses_every_other_writer(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Writes through another instance raise SessionBusyError and write nothing."""
        self._session(store)
        store.append_events("s1", "root", self._events("root", 0, 3))
        store.acquire("s1")
        before = store.load("s1")
        writes: list[Callable[[], object]] = [
            lambda: peer.append_events("s1", "root", self._events("root", 3, 2)),
            lambda: peer.append_events("s1", "root", self._events("root", 0, 3)),
            lambda: peer.put_agent("s1", AgentRecord("child", "root", "spec", "idle", 1)),
            lambda: peer.create_session("s1", root_agent_id="root"),
            lambda: peer.delete("s1"),
            lambda: peer.acquire("s1"),
        ]
        for write in writes:
            with pytest.raises(SessionBusyError, match="s1") as caught:
                write()
            assert caught.value.session_id == "s1"
        after = peer.load("s1")  # reading is never refused
        assert after.agents == before.agents
        assert peer.last_seq("s1", "root") == 2
        assert [info.event_count for info in peer.list_sessions()] == [3]
        store.append_events("s1", "root", self._events("root", 3, 1))
        assert peer.last_seq("s1", "root") == 3

    def test_the_busy_error_names_the_holder(self, store: SessionStore, peer: SessionStore) -> None:
        """The holder is named by host and process id, and the error says what to do."""
        store.acquire("s1")
        with pytest.raises(SessionBusyError) as caught:
            peer.acquire("s1")
        error = caught.value
        assert (error.holder_host, error.holder_pid) == (socket.gethostname(), os.getpid())
        assert str(os.getpid()) in str(error)
        assert isinstance(error, StoreError)

    def test_sessions_nobody_holds_stay_writable(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Holding one session leaves the others to everyone."""
        self._session(store, "s1")
        self._session(store, "s2")
        store.acquire("s1")
        peer.acquire("s2")
        peer.append_events("s2", "root", self._events("root", 0, 2))
        store.append_events("s1", "root", self._events("root", 0, 1))
        with pytest.raises(SessionBusyError):
            store.append_events("s2", "root", self._events("root", 2, 1))
        assert (store.last_seq("s1", "root"), store.last_seq("s2", "root")) == (0, 1)

    def test_release_frees_the_session(self, store: SessionStore, peer: SessionStore) -> None:
        """After release another instance can acquire it; then the first one is refused."""
        self._session(store)
        store.acquire("s1")
        peer.release("s1")  # releasing what another instance holds does nothing
        with pytest.raises(SessionBusyError):
            peer.acquire("s1")
        store.release("s1")
        peer.acquire("s1")
        peer.append_events("s1", "root", self._events("root", 0, 1))
        with pytest.raises(SessionBusyError):
            store.append_events("s1", "root", self._events("root", 1, 1))
        assert store.last_seq("s1", "root") == 0

    def test_close_releases_everything(self, store: SessionStore, tmp_path: Path) -> None:
        """Closing the holder frees every session it held."""
        self._session(store, "s1")
        self._session(store, "s2")
        holder = self.make_peer(store, tmp_path)
        try:
            holder.acquire("s1")
            holder.acquire("s2")
            with pytest.raises(SessionBusyError):
                store.acquire("s1")
        finally:
            holder.close()
        holder.release("s1")  # harmless after close
        store.acquire("s1")
        store.acquire("s2")
        store.append_events("s2", "root", self._events("root", 0, 1))
        assert store.last_seq("s2", "root") == 0

    def test_one_of_two_racing_instances_wins(
        self, store: SessionStore, peer: SessionStore
    ) -> None:
        """Two instances acquiring at once from two threads: exactly one holds the session."""
        start = threading.Barrier(2)
        outcomes: dict[int, str] = {}

        def claim(index: int, which: SessionStore) -> None:
            start.wait()
            try:
                which.acquire("race")
                outcomes[index] = "won"
            except SessionBusyError:
                outcomes[index] = "busy"
            except BaseException as exc:  # reported below: a thread cannot fail the test
                outcomes[index] = repr(exc)

        threads = [threading.Thread(target=claim, args=pair) for pair in enumerate([store, peer])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes.values()) == ["busy", "won"]

    def test_acquire_refuses_bad_ids_and_a_closed_store(self, tmp_path: Path) -> None:
        """An empty id is a caller mistake; a closed store acquires nothing."""
        store = self.make_store(tmp_path)
        with pytest.raises(UserError):
            store.acquire("")
        store.close()
        with pytest.raises(StoreError):
            store.acquire("s1")
