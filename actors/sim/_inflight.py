"""Real work in a simulation: model requests (and chosen tools) in flight together.

What a model request holds (the transcript, the tools, the settings) is fixed when the agent
asks, and its reply is needed only when the queue reaches it, at (t + latency, sequence). So
the request starts at once on a background event loop, and the queue holds an `InFlight` in
its place. Everything due before it is handled meanwhile (and starts its own requests); when
the queue reaches it the simulation waits for it if it is not back yet. The window is
conservative by construction: a request starts exactly when the one-at-a-time simulation would
have sent it, never earlier, so no reply can change what an earlier request said; replies are
applied in (virtual time, sequence) order, whatever order HTTP returned them in. Wall time
never reaches the log, except through what a provider answers (an error, a timeout).

`Issuer` owns one simulation's side of the loop: at most ``max_in_flight`` requests and tools
at once (the rest wait their turn, first come first served, so a model with state sees them in
the order the simulation made them), the rate limits per model (`RateLimit`, on wall time:
they delay issuing, never the log), and the counters a progress bar shows.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from actors._logging import get_logger
from actors.context._run_context import RunContext
from actors.exceptions import UserError
from actors.host import ToolPool
from actors.loop._outcome import outcome_of_error, outcome_of_return
from actors.loop._types import CallModel, CallTool, ModelReplied, ToolFinished, ToolOutcome
from actors.models._model import ModelRequest

__all__ = ["InFlight", "Issuer", "RateLimit", "RequestStats", "background_loop", "tool_pool"]


_log = get_logger("actors.sim")

# -- one event loop for every simulation of the process ------------------------------------------

_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None
_pool: tuple[int, ToolPool] | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's simulation loop, started on first use on a daemon thread.

    One loop for every simulation: an HTTP model keeps its client per event loop, so models
    shared by several simulations (a test's two runs) keep one client and its connections. A
    forked process (a `sweep` worker) starts its own.
    """
    global _loop
    with _loop_lock:
        if _loop is not None and _loop[0] == os.getpid() and not _loop[1].is_closed():
            return _loop[1]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=_serve, args=(loop,), name="actors-sim-requests", daemon=True
        )
        thread.start()
        _loop = (os.getpid(), loop)
        return loop


def tool_pool() -> ToolPool:
    """The process's threads for the blocking tools of simulations that run them concurrently."""
    global _pool
    with _loop_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ToolPool(32, name="actors-sim-tool"))
        return _pool[1]


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    loop.run_forever()


# -- rate limits ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RateLimit:
    """How fast a simulation may send one model's requests, on wall time.

    Limits hold back the start of requests; they never change the log (a reply's place on the
    virtual clock does not depend on when it was sent). Requests are spread out over the
    minute rather than sent in one burst: at most a second's worth go at once.

    Attributes:
        requests_per_minute: Requests started per minute (None: no limit).
        tokens_per_minute: Tokens (input and output) per minute (None: no limit). A request
            takes an estimate of its input tokens when it starts; its reply's usage settles
            the difference.
    """

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise UserError(f"RateLimit({name}=...) must be a number > 0, got {value!r}")


class _Bucket:
    """A token bucket refilled continuously at ``per_minute / 60`` a second."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)  # a second's worth: no whole minute in one burst
        self.level = self.capacity
        self.stamp = time.monotonic()

    def wait(self, cost: float) -> float:
        """Seconds until ``cost`` (at most a full bucket) is there; 0 when it is."""
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


class _Limiter:
    """One model's buckets; requests take their turn in the order they came."""

    def __init__(self, limit: RateLimit) -> None:
        self.requests = (
            None if limit.requests_per_minute is None else _Bucket(limit.requests_per_minute)
        )
        self.tokens = None if limit.tokens_per_minute is None else _Bucket(limit.tokens_per_minute)
        self.turn = asyncio.Lock()  # FIFO: the first to wait is the first to go

    async def acquire(self, estimate: int) -> None:
        async with self.turn:
            while True:
                wait = 0.0
                if self.requests is not None:
                    wait = self.requests.wait(1)
                if self.tokens is not None:
                    wait = max(wait, self.tokens.wait(estimate))
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            if self.requests is not None:
                self.requests.level -= 1
            if self.tokens is not None:
                self.tokens.level -= estimate

    def settle(self, estimate: int, used: int) -> None:
        if self.tokens is not None:
            self.tokens.level -= used - estimate


async def _tool_outcome(effect: CallTool, ctx: RunContext[Any]) -> ToolOutcome:
    tool, timeout = effect.tool, effect.timeout
    deadline = asyncio.timeout(timeout)
    if tool.is_async:
        try:
            async with deadline:
                value = await tool.invoke(ctx, effect.arguments)
        except TimeoutError as exc:
            if not deadline.expired():
                return outcome_of_error(exc)  # the tool's own timeout: an ordinary error
            ctx.cancellation.cancel(f"timed out after {timeout:g} s")
            return outcome_of_error(exc, timeout)
        except Exception as exc:
            return outcome_of_error(exc)
        return outcome_of_return(value)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[ToolOutcome] = loop.create_future()

    def settle(outcome: ToolOutcome) -> None:
        if not done.done():
            done.set_result(outcome)

    def work() -> None:
        try:
            outcome = outcome_of_return(tool.invoke(ctx, effect.arguments))
        except Exception as exc:  # a failing tool is a result for the model
            outcome = outcome_of_error(exc)
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            loop.call_soon_threadsafe(settle, outcome)

    abandon = tool_pool().submit(work, tool.name)
    try:
        async with deadline:
            return await done
    except TimeoutError:
        if not deadline.expired():
            raise
        # A blocking tool cannot be stopped: it is abandoned, and told to stop.
        abandon()
        ctx.cancellation.cancel(f"timed out after {timeout:g} s")
        return outcome_of_error(TimeoutError(), timeout)


def _closer(model: Any) -> Any:
    """What closes ``model``'s client: itself, or the model a wrapper (`CachedModel`) holds."""
    for _ in range(4):
        if callable(getattr(model, "aclose", None)):
            return model
        model = getattr(model, "inner", None)
        if model is None:
            return None
    return None


async def _close_all(models: list[Any]) -> None:
    for model in models:
        try:
            await model.aclose()
        except Exception:  # a client that fails to close leaves nothing for the run to fix
            _log.warning("closing a model's client failed", model=getattr(model, "name", ""))


def _estimate(request: ModelRequest) -> int:
    """Input tokens of ``request``, roughly (four characters a token), before it is sent."""
    characters = 0
    for message in request.messages:
        content = getattr(message, "content", "")
        characters += len(content) if type(content) is str else len(str(content))
    return characters // 4 + 1


# -- the simulation's side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestStats:
    """Model requests of a simulation that ran for real (not scripted replies).

    Attributes:
        in_flight: Started and not back yet.
        done: Back with a reply.
        failed: Back with an error (after the model's own retries).
        tokens: Input and output tokens of the replies.
    """

    in_flight: int = 0
    done: int = 0
    failed: int = 0
    tokens: int = 0


class InFlight:
    """What the queue holds in place of a reply that is being computed off the thread."""

    __slots__ = ("failure", "future")

    def __init__(
        self, future: concurrent.futures.Future[Any], failure: Callable[[BaseException], Any]
    ) -> None:
        self.future = future
        self.failure = failure  # the message to deliver if the work itself was lost

    def wait(self, tick: Callable[[], None] | None) -> Any:
        """The message the work ended with, waiting for it (``tick`` now and then meanwhile)."""
        future = self.future
        try:
            while tick is not None and not future.done():
                try:
                    return future.result(timeout=0.25)
                except concurrent.futures.TimeoutError:
                    tick()
            return future.result()
        except BaseException as exc:  # the loop went away under it: the agent's failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            return self.failure(exc)


class Issuer:
    """Starts one simulation's real work on the background loop, within its limits.

    Args:
        max_in_flight: Requests and tools running at once.
        rate_limits: Limits by model name.
    """

    def __init__(self, max_in_flight: int, rate_limits: Mapping[str, RateLimit]) -> None:
        self.max_in_flight = max_in_flight
        self.rate_limits = dict(rate_limits)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limiters: dict[str, _Limiter] = {}
        self._free = max_in_flight  # touched on the loop only, like the waiters
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Written by one thread each (started: the simulation's; the rest: the loop's), so
        # the counts need no lock.
        self.started = 0
        self.done = 0
        self.failed = 0
        self.tokens = 0
        self._requests: list[concurrent.futures.Future[Any]] = []  # this thread's only
        self._clients: dict[int, Any] = {}  # models whose HTTP clients to close, by id

    def stats(self) -> RequestStats:
        """The counts now."""
        done, failed = self.done, self.failed
        return RequestStats(self.started - done - failed, done, failed, self.tokens)

    def submit(self, work: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run ``work`` on the loop; a future of its result."""
        if self._loop is None:
            self._loop = background_loop()
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def request(self, model: Any, effect: CallModel, work: Any) -> InFlight:
        """Start a model request (``work``: an awaitable reply, or None for ``model.request``)."""
        self.started += 1
        closer = _closer(model)
        if closer is not None:
            self._clients.setdefault(id(closer), closer)
        requests = self._requests
        if len(requests) >= 1024:
            requests[:] = [future for future in requests if not future.done()]
        future = self.submit(self.model(model, effect, work))
        requests.append(future)
        run_id, step = effect.run_id, effect.step
        return InFlight(future, lambda error: ModelReplied(run_id, step, error=error))

    def close_clients(self, timeout: float = 30.0) -> None:
        """Close the HTTP clients of the models asked so far, once their requests are back.

        The models stay usable (a model opens a new client on its next request); what waits
        for the requests still in flight is only this call, never the log.
        """
        clients, self._clients = list(self._clients.values()), {}
        pending, self._requests = self._requests, []
        if not clients or self._loop is None:
            return
        concurrent.futures.wait(pending, timeout)
        closing = self.submit(_close_all(clients))
        with contextlib.suppress(concurrent.futures.TimeoutError):
            closing.result(timeout)

    # -- on the loop --------------------------------------------------------------------------

    async def _slot(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot just as it gave up: pass it on
            raise

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    async def model(self, model: Any, effect: CallModel, work: Any) -> ModelReplied:
        """Ask the model (``work``: an awaitable that replies, or None for ``model.request``)."""
        request = effect.request
        limiter = self._limiter(model)
        estimate = _estimate(request) if limiter is not None else 0
        await self._slot()
        try:
            if limiter is not None:
                await limiter.acquire(estimate)
            deadline = asyncio.timeout(effect.timeout)
            try:
                async with deadline:
                    response = await (model.request(request) if work is None else work)
            except TimeoutError as exc:
                if not deadline.expired():
                    raise  # the model's own timeout
                error = TimeoutError(f"model request timed out after {effect.timeout:g} s")
                raise error from exc
        except (Exception, asyncio.CancelledError) as exc:  # every failure is the agent's
            self.failed += 1
            return ModelReplied(effect.run_id, effect.step, error=exc)
        finally:
            self._release()
        usage = getattr(response, "usage", None)
        used = 0 if usage is None else usage.input_tokens + usage.output_tokens
        if limiter is not None:
            limiter.settle(estimate, used)
        self.tokens += used
        self.done += 1
        return ModelReplied(effect.run_id, effect.step, response=response)

    async def tool(self, effect: CallTool, ctx: RunContext[Any]) -> ToolFinished:
        """Run a tool (an async one on the loop, a sync one on a thread) in a slot."""
        await self._slot()
        try:
            outcome = await _tool_outcome(effect, ctx)
        except (Exception, asyncio.CancelledError) as exc:
            outcome = outcome_of_error(exc)
        finally:
            self._release()
        return ToolFinished(effect.run_id, effect.call.id, outcome)

    def _limiter(self, model: Any) -> _Limiter | None:
        if not self.rate_limits:
            return None
        name = getattr(model, "name", "")
        limiter = self._limiters.get(name)
        if limiter is None:
            limit = self.rate_limits.get(name)
            if limit is None:
                return None
            limiter = self._limiters[name] = _Limiter(limit)
        return limiter
