"""Runs in flight on the server: one at a time per session, each with a replayable stream.

A run is driven by a task of the server, not by the request that started it: a client that
disconnects loses nothing (the run goes on; its log is in the store), and a client that comes
back with ``Last-Event-ID`` reads the same stream from where it stopped. The events of a run
are kept in memory while it runs and for ``keep_for`` seconds after it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from actors import RunEnded, StreamEvent
from actors.serve._json import dumps
from actors.serve._wire import error_of, event_of

__all__ = ["RunChannel", "Runs", "StreamItem"]


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One server-sent event: its id (its index in the run), its name and its JSON data."""

    id: int
    kind: str
    data: bytes

    def encode(self) -> bytes:
        """The event in the ``text/event-stream`` format."""
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (self.id, self.kind.encode(), self.data)


@dataclass(eq=False)
class RunChannel:
    """The stream of one run: every event so far, and a wake-up for readers waiting on more."""

    run_id: str
    session_id: str
    items: list[StreamItem] = field(default_factory=list)
    ended: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, kind: str, data: dict[str, Any]) -> None:
        """Append one event and wake every reader (on the event loop)."""
        self.items.append(StreamItem(len(self.items), kind, dumps(data)))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def end(self) -> None:
        """No event comes after the last one pushed."""
        self.ended = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def follow(self, after: int, keepalive: float) -> AsyncIterator[bytes]:
        """The events after id ``after``, as they come; a comment every ``keepalive`` s idle."""
        index = max(0, after + 1)
        while True:
            changed = self._changed
            if index < len(self.items):
                # Whatever came since the last write goes out in one: a burst of deltas costs
                # one send, not one each. The batch is taken before the yield: events pushed
                # while the reader writes it are the next batch, never skipped.
                batch = self.items[index:]
                index += len(batch)
                yield b"".join(item.encode() for item in batch)
                continue  # look again: more may have come (the run's end) while this was sent
            if self.ended:
                return
            try:
                await asyncio.wait_for(changed.wait(), keepalive)
            except TimeoutError:
                yield b": keepalive\n\n"


class Runs:
    """The runs of one server: which session runs what, and the streams of recent runs."""

    def __init__(self, keep_for: float = 300.0) -> None:
        self._keep_for = keep_for
        self._active: dict[str, str] = {}  # session id -> run id
        self._channels: dict[str, RunChannel] = {}
        self._ended: dict[str, float] = {}  # run id -> when it ended (monotonic)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count()

    def active(self, session_id: str) -> str | None:
        """The run in progress on a session, or None."""
        return self._active.get(session_id)

    def begin(self, session_id: str) -> str | None:
        """Claim the session for a new run: its id, or None when a run holds it already."""
        if session_id in self._active:
            return None
        run_id = f"{uuid.uuid4().hex[:12]}{next(self._ids)}"
        self._active[session_id] = run_id
        return run_id

    def finish(self, session_id: str, run_id: str) -> None:
        """The run ended: the session is free again."""
        if self._active.get(session_id) == run_id:
            del self._active[session_id]

    def channel(self, run_id: str) -> RunChannel | None:
        """The stream of a run in progress or recently ended, or None."""
        self._forget_old()
        return self._channels.get(run_id)

    def stream(
        self,
        session_id: str,
        run_id: str,
        events: Callable[[], AsyncIterator[StreamEvent]],
        on_end: Callable[[], None],
    ) -> RunChannel:
        """Drive a streamed run in a task of the server; its channel."""
        self._forget_old()
        channel = RunChannel(run_id, session_id)
        self._channels[run_id] = channel
        channel.push("run_started", {"run_id": run_id, "session_id": session_id})
        task = asyncio.get_running_loop().create_task(self._drive(channel, events, on_end))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return channel

    async def _drive(
        self,
        channel: RunChannel,
        events: Callable[[], AsyncIterator[StreamEvent]],
        on_end: Callable[[], None],
    ) -> None:
        ended = False
        try:
            async for event in events():
                channel.push(event.kind, event_of(event))
                ended = ended or isinstance(event, RunEnded)
        except Exception as exc:  # the stream broke: its readers are told, the server lives on
            if not ended:
                channel.push("run_ended", {"kind": "run_ended", "result": None, **_err(exc)})
        finally:
            channel.end()
            self.finish(channel.session_id, channel.run_id)
            self._ended[channel.run_id] = time.monotonic()
            on_end()

    def _forget_old(self) -> None:
        horizon = time.monotonic() - self._keep_for
        # In the order they ended: stop at the first one still kept (O(forgotten), not O(all)).
        while self._ended:
            run_id, when = next(iter(self._ended.items()))
            if when >= horizon:
                break
            del self._ended[run_id]
            self._channels.pop(run_id, None)

    async def aclose(self) -> None:
        """Wait for the tasks still driving runs (the runtime is shutting down)."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _err(exc: BaseException) -> dict[str, Any]:
    return {"error": error_of(exc)}
