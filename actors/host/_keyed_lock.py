"""`KeyedLock`: a lock per key (a session id), so that work on one key never waits for another's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["KeyedLock"]


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.users = 0  # threads holding or waiting for the lock


class KeyedLock:
    """One reentrant lock per key, made on first use and dropped once nobody holds or wants it.

    Opening a session checks whether it is live, loads or creates it, and registers its agent:
    two threads doing that for one session must take turns, two for different sessions must not
    (a server opens a session per request). Entries are dropped when free, so a process that
    sees a million session ids keeps none of them here.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the lock of ``key`` for the block (the same thread may take it again inside)."""
        with self._guard:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if not entry.users:
                    del self._entries[key]

    def __len__(self) -> int:
        """How many keys are held or waited for now."""
        with self._guard:
            return len(self._entries)
