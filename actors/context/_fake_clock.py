"""`FakeClock`: timestamps that move only when a test says so."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]


class FakeClock:
    """A clock for reproducible logs: each reading is ``step`` later than the previous one.

    Args:
        start: The first reading.
        step: How far each reading advances (zero keeps time still).
    """

    def __init__(
        self,
        start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
        step: timedelta = timedelta(milliseconds=1),
    ) -> None:
        self._now = start
        self._step = step
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            now = self._now
            self._now = now + self._step
            return now

    def advance(self, delta: timedelta) -> None:
        """Move the clock forward by ``delta``."""
        with self._lock:
            self._now += delta
