from pathlib import Path

from actors.store import MemoryStore, SessionStore
from actors.store.conformance import StoreConformance


class TestMemoryStore(StoreConformance):
    def make_store(self, tmp_path: Path) -> SessionStore:
        return MemoryStore()

    def make_peer(self, store: SessionStore, tmp_path: Path) -> SessionStore:
        assert isinstance(store, MemoryStore)
        return store.sibling()


def test_repr_says_how_many_sessions() -> None:
    store = MemoryStore()
    store.create_session("s1", root_agent_id="root")
    assert repr(store) == "<MemoryStore 1 sessions>"
    store.close()
    assert repr(store) == "<MemoryStore closed>"
