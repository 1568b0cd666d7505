"""Server-sent events: turn a ``text/event-stream`` body into events.

Follows the WHATWG HTML "event stream interpretation" rules that both providers use: lines end
with CRLF, LF or CR (and nothing else, so a U+2028 inside a JSON string stays put, unlike with
``str.splitlines``); fields ``event`` and ``data`` (several ``data`` lines join with newlines);
comments start with a colon; a blank line ends an event. ``id`` and ``retry`` are read past:
no provider here resumes a stream.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass

from actors.models._model import ModelResponse, StreamDelta

__all__ = ["ServerSentEvent", "StreamAssembler", "iter_lines", "iter_sse"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event of a stream: its type (``"message"`` unless named) and its data."""

    event: str
    data: str


async def iter_lines(chunks: AsyncIterable[str]) -> AsyncIterator[str]:
    """Yield the lines of decoded text chunks, without their line endings."""
    pending = ""
    async for chunk in chunks:
        pending += chunk
        start = 0
        for match in _LINE_END.finditer(pending):
            # A CR at the very end may be the first half of a CRLF split across chunks.
            if match.group() == "\r" and match.end() == len(pending):
                break
            yield pending[start : match.start()]
            start = match.end()
        pending = pending[start:]
    if pending:
        yield pending.removesuffix("\r")


async def iter_sse(chunks: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Yield the events of a stream, given its body as decoded text chunks."""
    event = ""
    data: list[str] = []
    async for line in iter_lines(chunks):
        if not line:
            if data:
                yield ServerSentEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    # A stream may end without the blank line after its last event.
    if data:
        yield ServerSentEvent(event or "message", "\n".join(data))


class StreamAssembler(ABC):
    """Builds one reply from a provider's stream of events."""

    @abstractmethod
    def feed(self, event: ServerSentEvent) -> Iterable[StreamDelta]:
        """Take one event; return the deltas it carries for ``on_delta``.

        Raises:
            UnexpectedModelResponse: The event cannot be understood.
            RetryableError: The provider reported a passing failure inside the stream.
            ModelError: The provider reported another failure inside the stream.
        """

    @property
    @abstractmethod
    def done(self) -> bool:
        """Whether the stream's terminating event has arrived (stop reading)."""

    @property
    @abstractmethod
    def complete(self) -> bool:
        """Whether enough has arrived to answer (the reply's end, if not the stream's)."""

    @abstractmethod
    def response(self) -> ModelResponse:
        """The assembled reply (only once `complete`)."""
