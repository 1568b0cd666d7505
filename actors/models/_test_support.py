"""What the test models share: waiting, streaming, a bounded request history, cheap counting.

None of it does I/O. Two rules shape it: a test model's work per request must not grow with
the transcript (a reused agent in a long simulation sends thousands of requests), and what it
keeps must be bounded (a long-lived process must not hold every request it ever answered).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar, cast

from actors.context._message_view import MessageView
from actors.context._messages import AssistantMessage, Message
from actors.exceptions import Cancelled, UserError
from actors.models._model import ModelRequest, ModelResponse, StreamDelta

__all__ = [
    "DEFAULT_HISTORY",
    "RequestHistory",
    "Tally",
    "TranscriptTally",
    "call_off_loop",
    "check_chunk_size",
    "deltas_of",
    "stream_reply",
    "wait",
]

T = TypeVar("T")

DEFAULT_HISTORY = 100
"""How many requests a test model keeps by default (the most recent ones)."""


async def wait(latency: float, request: ModelRequest) -> None:
    """Wait ``latency`` seconds, or less if the run is cancelled (never blocks a thread)."""
    if latency <= 0:
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def release() -> None:
        if not done.done():
            done.set_result(None)

    def on_cancel(_reason: str) -> None:
        loop.call_soon_threadsafe(release)

    unregister = request.cancellation.on_cancel(on_cancel)
    try:
        await asyncio.wait_for(asyncio.shield(done), latency)
    except TimeoutError:
        pass
    finally:
        unregister()


async def call_off_loop(function: Callable[..., T], *args: Any) -> T:
    """Call a sync ``function`` on a thread of its own and await its result on this loop.

    The event loop goes on serving every other agent's model calls and timers meanwhile. The
    thread is a daemon: a function that never returns is abandoned when its awaiter gives up
    (a model timeout, a cancelled run) and never keeps the process from exiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # the awaiter gave up (timeout, cancellation)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = function(*args)
        except Exception as exc:
            error = exc
        except BaseException as exc:  # SystemExit and the like: still an answer for the awaiter
            error = RuntimeError(f"the model function raised {type(exc).__name__}")
            error.__cause__ = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="actors-function-model", daemon=True).start()
    return await future


# -- streaming ----------------------------------------------------------------------------------


def check_chunk_size(chunk_size: int | None) -> int | None:
    """Validate a test model's ``chunk_size`` (None: never stream)."""
    if chunk_size is None:
        return None
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise UserError(f"chunk_size must be a positive int or None, got {chunk_size!r}")
    return chunk_size


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def deltas_of(response: ModelResponse, chunk_size: int) -> Iterable[StreamDelta]:
    """The pieces a streaming provider would send for ``response``, in its order."""
    message = response.message
    for piece in _pieces(message.content, chunk_size):
        yield StreamDelta(kind="text", text=piece)
    for index, call in enumerate(message.tool_calls):
        pieces = _pieces(json.dumps(call.arguments), chunk_size) or [""]
        for n, piece in enumerate(pieces):
            if n == 0:
                yield StreamDelta(
                    kind="tool_call",
                    text=piece,
                    index=index,
                    tool_call_id=call.id,
                    tool_name=call.name,
                )
            else:
                yield StreamDelta(kind="tool_call", text=piece, index=index)


async def stream_reply(
    response: ModelResponse, request: ModelRequest, chunk_size: int | None
) -> ModelResponse:
    """Send ``response`` to ``request.on_delta`` in pieces (when both are set), then return it.

    Between pieces the loop serves others, and a cancelled run stops the stream.
    """
    on_delta = request.on_delta
    if chunk_size is None or on_delta is None:
        return response
    for delta in deltas_of(response, chunk_size):
        await asyncio.sleep(0)
        if request.cancellation.cancelled:
            raise Cancelled(request.cancellation.reason or "cancelled")
        on_delta(delta)
    return response


# -- what a test model keeps ----------------------------------------------------------------------


def check_history(history: int | None) -> int | None:
    """Validate a test model's ``history`` (None: keep every request)."""
    if history is None:
        return None
    if not isinstance(history, int) or isinstance(history, bool) or history < 0:
        raise UserError(f"history must be an int >= 0 or None (keep all), got {history!r}")
    return history


class RequestHistory:
    """The most recent requests a test model received, at most ``limit`` (None: all).

    A request holds a view of the transcript, not a copy, so each one costs little; the bound
    keeps a long-lived process from keeping every request of every agent.
    """

    def __init__(self, limit: int | None) -> None:
        self._items: deque[ModelRequest] = deque(maxlen=check_history(limit))

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy pickled for another process (Ray ships specs) records its own requests.
        return (RequestHistory, (self._items.maxlen,))

    def add(self, request: ModelRequest) -> None:
        self._items.append(request)  # deque appends are atomic: models answer on many threads

    def snapshot(self) -> list[ModelRequest]:
        return list(self._items)


class Tally(NamedTuple):
    """What a test model counts over the messages it is shown."""

    assistant_messages: int = 0
    tokens: int = 0


_tally_of = tuple.__new__


def tally(messages: Iterable[Message]) -> Tally:
    return Tally(*_counts(messages))


def _counts(messages: Iterable[Message]) -> tuple[int, int]:
    """Assistant messages and estimated tokens of ``messages``."""
    assistants = tokens = 0
    for message in messages:
        if isinstance(message, AssistantMessage):
            assistants += 1
        content = getattr(message, "content", "")
        tokens += len((content if type(content) is str else str(content)).split()) + 1
    return assistants, tokens


class TranscriptTally:
    """Counts assistant messages and estimated tokens of each request at the cost of what is new.

    An agent's requests show the same transcript growing at its end (see `MessageView`): per
    agent, the totals of the part already seen are kept, with the name of that part, and only
    messages appended since are counted. Anything else (a replaced range, a plain list from a
    history processor) is counted whole. At most ``agents`` agents are remembered (the least
    recently asking is forgotten): plain numbers, never a message. The default is sized for a
    simulation's population on one script: an agent forgotten between two of its requests
    (agents take turns) would have its whole transcript counted at every request.
    """

    def __init__(self, agents: int = 65_536) -> None:
        # agent id -> (log id, generation, messages counted, assistant messages, tokens), the
        # least recent first: an OrderedDict forgets its first entry at once, where a dict
        # would walk the holes its re-insertions left.
        self._seen: OrderedDict[str, tuple[int, int, int, int, int]] = OrderedDict()
        self._limit = agents
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy pickled for another process starts counting afresh (it sees other requests).
        return (TranscriptTally, (self._limit,))

    def count(self, agent_id: str, messages: Sequence[Message]) -> Tally:
        origin = messages.origin if isinstance(messages, MessageView) else None
        if origin is None:
            return tally(messages)
        view = cast(MessageView, messages)
        log, generation, stop = origin
        seen_map = self._seen
        # An agent has one request in flight: its own entry needs no lock (a dict's get and
        # set are atomic); only forgetting the least recent agent does.
        seen = seen_map.pop(agent_id, None)
        if seen is not None and seen[0] == log and seen[1] == generation and seen[2] <= stop:
            # Only what is new since this agent's last request (a few messages).
            assistants, tokens = _counts(view.transcript_since(seen[2]))
            assistants, tokens = assistants + seen[3], tokens + seen[4]
        else:
            assistants, tokens = _counts(view.transcript_since(0))
        seen_map[agent_id] = (log, generation, stop, assistants, tokens)  # now the most recent
        if len(seen_map) > self._limit:
            with self._lock:
                while len(seen_map) > self._limit:
                    try:
                        seen_map.popitem(last=False)
                    except KeyError:  # another thread's request took it meanwhile
                        break
        if view.hidden is not None:
            hidden = _counts((view.hidden,))
            assistants, tokens = assistants - hidden[0], tokens - hidden[1]
        if view.head is not None:
            head = _counts((view.head,))
            assistants, tokens = assistants + head[0], tokens + head[1]
        return _tally_of(Tally, (assistants, tokens))  # Tally(...) without its Python __new__
