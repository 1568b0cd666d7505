"""The threads blocking tools run on: bounded, and never held hostage by a stuck tool.

A sync tool cannot be interrupted: one that ignores its cancellation token runs on after its
timeout. `concurrent.futures.ThreadPoolExecutor` would keep it in a slot (a healthy tool then
"times out" without ever running) and join it at interpreter exit (the process never exits).
Here a call that outlives its timeout is *abandoned*: its slot is handed back at once (a new
worker takes its place when there is work), its thread is a daemon that ends when the call
does, and the abandonment is logged once.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Callable

from actors._logging import get_logger

__all__ = ["ToolPool"]

_log = get_logger("actors.tools")
_names = itertools.count(1)


class _Job:
    __slots__ = ("abandoned", "fn", "label", "worker")

    def __init__(self, fn: Callable[[], None], label: str) -> None:
        self.fn = fn
        self.label = label
        self.abandoned = False
        self.worker: _Worker | None = None


class _Worker:
    __slots__ = ("retired",)

    def __init__(self) -> None:
        self.retired = False  # its call was abandoned: it ends with that call


class ToolPool:
    """At most ``max_workers`` healthy calls at once, on daemon threads started on demand.

    Args:
        max_workers: Calls that may run at once (abandoned calls do not count).
        name: The threads' name prefix.
    """

    def __init__(self, max_workers: int, name: str = "actors-tool") -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._max = max_workers
        self._name = name
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._workers = 0  # healthy workers alive
        self._idle = 0  # healthy workers waiting for a job
        self._abandoned = 0  # abandoned calls still running
        self._closed = False

    @property
    def abandoned(self) -> int:
        """Calls abandoned past their timeout that have not returned yet."""
        with self._lock:
            return self._abandoned

    def submit(self, fn: Callable[[], None], label: str = "") -> Callable[[], None]:
        """Run ``fn`` on a pool thread; returns a function that abandons the call.

        Abandoning a call that has not started drops it; abandoning one that runs frees its
        slot for the next call (its thread ends when ``fn`` returns). ``fn`` must not raise.
        """
        job = _Job(fn, label)
        with self._lock:
            if self._closed:
                return lambda: None
            self._queue.append(job)
            if self._idle:
                self._work.notify()
            elif self._workers < self._max:
                self._start_worker()
        return lambda: self._abandon(job)

    def _start_worker(self) -> None:
        # Called with the lock held.
        self._workers += 1
        thread = threading.Thread(
            target=self._run, name=f"{self._name}-{next(_names)}", daemon=True
        )
        thread.start()

    def _abandon(self, job: _Job) -> None:
        with self._lock:
            if job.abandoned:
                return
            job.abandoned = True
            worker = job.worker
            if worker is None:  # not started: drop it
                with contextlib.suppress(ValueError):
                    self._queue.remove(job)
                return
            # Running: its worker retires with the call; its slot goes to a new worker.
            worker.retired = True
            self._workers -= 1
            self._abandoned += 1
            if self._queue and not self._closed and self._idle == 0:
                self._start_worker()
        _log.warning(
            "a blocking tool outlived its timeout and was abandoned; its thread ends when it "
            "returns (tools should check ctx.cancelled)",
            tool=job.label,
        )

    def _run(self) -> None:
        worker = _Worker()
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._idle += 1
                    self._work.wait()
                    self._idle -= 1
                if self._closed and not self._queue:
                    self._workers -= 1
                    return
                job = self._queue.popleft()
                job.worker = worker
            try:
                job.fn()
            except Exception:  # a job must not raise; if one does, the worker lives on
                _log.exception("a tool pool job raised", tool=job.label)
            with self._lock:
                if worker.retired:
                    self._abandoned -= 1
                    return
                job.worker = None

    def close(self) -> None:
        """Drop calls not started; running calls end on their own (their threads are daemons)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            self._work.notify_all()
