"""`CancellationToken`: how a run's cancel reaches its tools, checked or waited on."""

from __future__ import annotations

import threading
from collections.abc import Callable

from actors.exceptions import Cancelled

__all__ = ["CancellationToken"]


class CancellationToken:
    """A flag that a run sets once, and that tools and model calls can watch.

    Thread-safe. Cooperative code checks `cancelled` or calls `raise_if_cancelled()`; code that
    waits can `wait()` on it, and async code can register a callback with `on_cancel()`.
    """

    __slots__ = ("_callbacks", "_cancelled", "_event", "_lock", "_reason")

    def __init__(self) -> None:
        # One token per run and per tool call: the Event (a Condition, several locks) is made
        # only for code that actually waits.
        self._cancelled = False
        self._event: threading.Event | None = None
        self._lock = threading.Lock()
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether the run was cancelled."""
        return self._cancelled

    @property
    def reason(self) -> str | None:
        """Why it was cancelled, or None while it is not."""
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the flag (once; later calls do nothing) and run the registered callbacks.

        Raises:
            Exception: the error of a failing callback (an `ExceptionGroup` when several failed),
                after every callback ran and the token is cancelled.
        """
        with self._lock:
            if self._cancelled:
                return
            self._reason = reason
            self._cancelled = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        # Every callback runs even when one fails (each may cancel a different piece of work);
        # the failures are raised afterwards.
        errors: list[Exception] = []
        for callback in callbacks:
            try:
                callback(reason)
            except Exception as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup("cancellation callbacks failed", errors)

    def on_cancel(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Run ``callback(reason)`` when cancelled (at once if already); returns an unregister."""
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(callback)

                def unregister() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unregister
        callback(self._reason or "cancelled")
        return lambda: None

    def raise_if_cancelled(self) -> None:
        """Raise `actors.exceptions.Cancelled` if the run was cancelled."""
        if self._cancelled:
            raise Cancelled(self._reason or "cancelled")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; returns whether it was cancelled."""
        with self._lock:
            if self._event is None:
                self._event = threading.Event()
                if self._cancelled:
                    self._event.set()
            event = self._event
        return event.wait(timeout)

    def __repr__(self) -> str:
        state = f"cancelled: {self._reason!r}" if self.cancelled else "active"
        return f"<CancellationToken {state}>"
