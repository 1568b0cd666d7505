import gc
from pathlib import Path

import pytest

from actors.exceptions import SessionBusyError, StoreError
from actors.store import MemoryStore, SessionStore
from actors.store.conformance import StoreConformance


class TestMemoryStore(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return MemoryStore()

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        assert isinstance(store, MemoryStore)
        return store.sibling()


class _StoreWithoutBeginSession(MemoryStore):
    """A store written before `begin_session`: the helper falls back to the four calls."""

    @property
    def begin_session(self) -> None:  # type: ignore[override]
        raise AttributeError("begin_session")


class TestStoreWithoutBeginSession(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return _StoreWithoutBeginSession()

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        assert isinstance(store, MemoryStore)
        return store.sibling()


def test_repr_says_how_many_sessions() -> None:
    store = MemoryStore()
    store.create_session("s1", root_agent_id="root")
    assert repr(store) == "<MemoryStore 1 sessions>"
    store.close()
    assert repr(store) == "<MemoryStore closed>"


def test_siblings_share_sessions_until_the_last_closes() -> None:
    first = MemoryStore()
    second = first.sibling()
    first.create_session("s1", root_agent_id="root")
    assert [info.session_id for info in second.list_sessions()] == ["s1"]
    first.close()
    assert second.load("s1").root_agent_id == "root"  # still open: the sessions stay
    second.close()
    with pytest.raises(StoreError, match="closed"):
        first.sibling()


def test_a_forgotten_sibling_holds_nothing() -> None:
    store = MemoryStore()
    holder = store.sibling()
    holder.acquire("s1")
    with pytest.raises(SessionBusyError):
        store.acquire("s1")
    del holder  # garbage-collected without close
    gc.collect()
    store.acquire("s1")
    store.close()
