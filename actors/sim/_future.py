"""`InlineFuture`: a `concurrent.futures.Future` for a simulation, which runs on one thread.

Every run a world starts gets a future. The standard one is built for threads (a condition and
its lock per future, a notify on every result), which a simulation never uses: its futures
are settled and read on the thread that drives it, so this one keeps a state, a value and its
callbacks. It is a `concurrent.futures.Future` all the same (``asyncio.wrap_future`` takes
it), with the same answers; ``result()`` on one that is not done raises at once instead of
waiting, since nothing on another thread would settle it, and ``concurrent.futures.wait`` and
``as_completed``, which wait on a condition, do not take it.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from actors._logging import get_logger

__all__ = ["InlineFuture"]

_log = get_logger("actors.sim")

T = TypeVar("T")

_PENDING, _DONE, _CANCELLED = 0, 1, 2


class InlineFuture(concurrent.futures.Future[T], Generic[T]):
    """A future settled and read on one thread (see the module's docstring)."""

    def __init__(self) -> None:  # no condition, no lock: the base's __init__ is not called
        self._state_ = _PENDING
        self._value: Any = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[concurrent.futures.Future[T]], object]] = []

    def cancel(self) -> bool:
        if self._state_ == _DONE:
            return False
        if self._state_ == _PENDING:
            self._state_ = _CANCELLED
            self._run_callbacks()
        return True

    def cancelled(self) -> bool:
        return self._state_ == _CANCELLED

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return self._state_ != _PENDING

    def result(self, timeout: float | None = None) -> T:
        self._check_done()
        if self._error is not None:
            try:
                raise self._error
            finally:
                self = None  # type: ignore[assignment]  # no cycle through the traceback
        return self._value  # type: ignore[no-any-return]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._check_done()
        return self._error

    def add_done_callback(self, fn: Callable[[concurrent.futures.Future[T]], object]) -> None:
        if self._state_ == _PENDING:
            self._callbacks.append(fn)
            return
        try:
            fn(self)
        except Exception:
            _log.exception("a run future's callback failed")

    def set_running_or_notify_cancel(self) -> bool:
        if self._state_ == _CANCELLED:
            return False
        if self._state_ == _DONE:
            raise concurrent.futures.InvalidStateError("the future is done already")
        return True

    def set_result(self, result: T) -> None:
        self._settle(result, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._settle(None, exception)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        if self._state_ != _PENDING:
            raise concurrent.futures.InvalidStateError("the future is done already")
        self._value, self._error, self._state_ = value, error, _DONE
        self._run_callbacks()

    def _check_done(self) -> None:
        if self._state_ == _CANCELLED:
            raise concurrent.futures.CancelledError()
        if self._state_ == _PENDING:
            raise concurrent.futures.TimeoutError(
                "the simulation has not ended this run yet: call result() on the run's "
                "future (it runs the simulation until then)"
            )

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # as the standard future: logged, the others still called
                _log.exception("a run future's callback failed")

    def __repr__(self) -> str:
        state = ("pending", "finished", "cancelled")[self._state_]
        return f"<InlineFuture {state}>"
