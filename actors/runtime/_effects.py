"""Where effects run: model calls and async tools on one asyncio loop, sync tools on threads.

Completions go back to the agent as messages.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from actors._logging import get_logger
from actors.context._run_context import Delegator, RunContext, with_delegator
from actors.context._suspension import Answer
from actors.exceptions import Cancelled
from actors.host._approval import ApprovalHandler, decide_approval
from actors.host._tool_pool import ToolPool
from actors.loop._outcome import outcome_of_error, outcome_of_return
from actors.loop._types import (
    ApprovalDecided,
    AskApproval,
    CallModel,
    CallTool,
    Input,
    ModelReplied,
    ToolFinished,
    ToolOutcome,
)

__all__ = ["ApprovalHandler", "EffectRunner", "decide_approval"]

_log = get_logger("actors.effects")

Deliver = Callable[[Input], None]


def _tool_failed(name: str, ctx: RunContext[Any], exc: BaseException) -> ToolOutcome:
    """A tool raised: the traceback goes to the log, the type and message to the model."""
    _log.warning(
        "tool raised",
        tool=name,
        agent_id=ctx.agent_id,
        parent_id=ctx.parent_id,
        run_id=ctx.run_id,
        tool_call_id=ctx.tool_call_id,
        exc_info=exc,
    )
    return outcome_of_error(exc)


def _safe_outcome(tool: str, ctx: RunContext[Any], work: Callable[[], ToolOutcome]) -> ToolOutcome:
    """``work()``, or an error outcome if even turning the tool's end into one failed.

    A user's exception whose ``__str__`` raises must not leave the run waiting forever.
    """
    try:
        return work()
    except Exception as exc:
        try:
            return _tool_failed(tool, ctx, exc)
        except Exception:
            return ToolOutcome(content=f"{type(exc).__name__} (unprintable)", is_error=True)


class EffectRunner:
    """Runs model calls and tools off the agents' threads.

    Args:
        max_workers: Threads for sync tools (blocking or CPU-bound work).
    """

    def __init__(self, max_workers: int = 32) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="actors-effects", daemon=True)
        self._pool = ToolPool(max_workers)
        self._closed = False
        # Models with clients (``aclose``) by id, with how many live agents use each: a model
        # nobody uses any more has its client closed (it reopens one if used again).
        self._models: dict[int, tuple[Any, int]] = {}
        self._models_lock = threading.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closing: set[asyncio.Task[None]] = set()  # clients being closed: let them finish
        self._thread.start()

    @property
    def tools(self) -> ToolPool:
        """The pool blocking tools run on."""
        return self._pool

    def retain(self, model: Any) -> None:
        """A live agent uses ``model``."""
        if not hasattr(model, "aclose"):
            return
        with self._models_lock:
            _, count = self._models.get(id(model), (model, 0))
            self._models[id(model)] = (model, count + 1)

    def release(self, model: Any) -> None:
        """An agent that used ``model`` stopped: close its client if no live agent uses it."""
        with self._models_lock:
            if self._closed:
                return  # the closing runner's drain closes every model it still holds
            entry = self._models.get(id(model))
            if entry is None or entry[0] is not model:
                return
            if entry[1] > 1:
                self._models[id(model)] = (model, entry[1] - 1)
                return
            del self._models[id(model)]
            # Queued under the lock, so before any drain `close` queues: the drain waits for it.
            self._soon(lambda: self._start_closing(model))

    def _start_closing(self, model: Any) -> None:
        task = self._loop.create_task(_close_model(model))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The effects' event loop."""
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run a coroutine on the effects loop; returns a future of its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run an effect's coroutine, fire and forget: it delivers its own completion.

        Cheaper than `submit` (no concurrent future to chain), which matters on the hot path.
        """
        try:
            self._loop.call_soon_threadsafe(self._create_task, coro)
        except RuntimeError:  # closed: the runtime is gone, nobody waits for this effect
            coro.close()

    def _create_task(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)  # a strong reference until it ends
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            _log.error("an effect failed outside its own error handling", exc_info=error)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` on the loop after ``delay`` seconds; returns a cancel function.

        Once the runner is closed, timers are neither set nor cancelled (nothing runs then).
        """
        handle: list[asyncio.TimerHandle] = []

        def schedule() -> None:
            handle.append(self._loop.call_later(delay, callback))

        self._soon(schedule)

        def cancel() -> None:
            def cancel_now() -> None:
                if handle:
                    handle[0].cancel()

            self._soon(cancel_now)

        return cancel

    def _soon(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the runtime is gone
            self._loop.call_soon_threadsafe(callback)

    # -- model calls --------------------------------------------------------------------------

    def call_model(self, effect: CallModel, model: Any, deliver: Deliver) -> None:
        """Start a model request; its reply (or error) is delivered as `ModelReplied`."""
        with contextlib.suppress(RuntimeError):  # closed: the runtime is gone, nobody waits
            self._loop.call_soon_threadsafe(self._start_model, effect, model, deliver)

    def _start_model(self, effect: CallModel, model: Any, deliver: Deliver) -> None:
        """One task per request, its timeout a timer and its end a callback (no wrapper task).

        Every request of a runtime's models starts here, so what it costs counts: a task
        awaiting the request's task, with an `asyncio.timeout` around it, cost a second task,
        a context manager and more wake-ups per request.
        """
        try:
            # A model whose `request` raises (or returns no awaitable) before any coroutine
            # runs fails the step instead of leaving the agent waiting forever.
            task = asyncio.ensure_future(model.request(effect.request), loop=self._loop)
        except Exception as exc:
            deliver(ModelReplied(effect.run_id, effect.step, error=exc))
            return
        self._tasks.add(task)  # a strong reference until it ends
        _ModelCall(self._loop, effect, deliver, task, self._tasks)

    # -- tools --------------------------------------------------------------------------------

    def call_tool(self, effect: CallTool, deliver: Deliver, delegator: Delegator | None) -> None:
        """Start a tool call; its outcome is delivered as `ToolFinished`."""
        ctx: RunContext[Any] = effect.ctx
        if delegator is not None:
            ctx = with_delegator(ctx, delegator)
        if effect.tool.is_async:
            self._start(self._tool(effect, ctx, deliver))
        else:
            self._sync_tool(effect, ctx, deliver)

    def _sync_tool(self, effect: CallTool, ctx: RunContext[Any], deliver: Deliver) -> None:
        """Run a sync tool on the pool, straight from the agent's thread and back.

        The timeout is a timer on the loop: whichever of the result and the timer comes first
        is delivered, the other is dropped. A tool still running at its timeout is abandoned:
        its slot goes to the next call, and its thread never keeps the process from exiting.
        """
        lock = threading.Lock()
        delivered = False

        def finish(outcome: ToolOutcome) -> bool:
            nonlocal delivered
            with lock:
                if delivered:
                    return False
                delivered = True
            deliver(ToolFinished(effect.run_id, effect.call.id, outcome))
            return True

        def outcome() -> ToolOutcome:
            try:
                return outcome_of_return(effect.tool.invoke(ctx, effect.arguments))
            except Cancelled as exc:  # the tool stopped as asked: expected, not a failure
                return outcome_of_error(exc)
            except Exception as exc:  # a failing tool is a result for the model, not a crash
                return _tool_failed(effect.tool.name, ctx, exc)

        cancel_timer: Callable[[], None] | None = None

        def work() -> None:
            if finish(_safe_outcome(effect.tool.name, ctx, outcome)) and cancel_timer is not None:
                cancel_timer()

        abandon = self._pool.submit(work, effect.tool.name)
        if effect.timeout is not None:
            timeout = effect.timeout

            def expire() -> None:
                if finish(outcome_of_error(TimeoutError(), timeout)):
                    ctx.cancellation.cancel(f"timed out after {timeout:g} s")
                    abandon()

            cancel_timer = self.call_later(timeout, expire)

    async def _tool(self, effect: CallTool, ctx: RunContext[Any], deliver: Deliver) -> None:
        tool = effect.tool
        deadline = asyncio.timeout(effect.timeout)
        try:
            async with deadline:
                value = await tool.invoke(ctx, effect.arguments)
            outcome = outcome_of_return(value)
        except TimeoutError as exc:
            if deadline.expired():
                ctx.cancellation.cancel(f"timed out after {effect.timeout:g} s")
                outcome = outcome_of_error(exc, effect.timeout)
            else:  # the tool's own TimeoutError (a service it called) is an ordinary error
                outcome = _tool_failed(tool.name, ctx, exc)
        except asyncio.CancelledError:
            outcome = outcome_of_error(Cancelled(ctx.cancellation.reason or "cancelled"))
        except Cancelled as exc:  # the tool stopped as asked: expected, not a failure
            outcome = outcome_of_error(exc)
        except Exception as exc:  # a failing tool is a result for the model, not a crash
            error = exc
            outcome = _safe_outcome(tool.name, ctx, lambda: _tool_failed(tool.name, ctx, error))
        deliver(ToolFinished(effect.run_id, effect.call.id, outcome))

    def call_approval(
        self, effect: AskApproval, handler: ApprovalHandler, deliver: Deliver
    ) -> None:
        """Ask the host's approval handler on a tool thread; deliver `ApprovalDecided`.

        Every wait has a bound: a handler still silent after the tool's timeout denies.
        """
        lock = threading.Lock()
        delivered = False

        def finish(answer: Answer) -> bool:
            nonlocal delivered
            with lock:
                if delivered:
                    return False
                delivered = True
            deliver(ApprovalDecided(effect.run_id, effect.call_id, answer))
            return True

        cancel_timer: Callable[[], None] | None = None
        if effect.timeout is not None:
            reason = f"the approval handler did not answer within {effect.timeout:g} s"

            def expire() -> None:
                finish(Answer(ok=False, reason=reason))

            cancel_timer = self.call_later(effect.timeout, expire)

        def decide() -> None:
            if finish(decide_approval(handler, effect.request)) and cancel_timer is not None:
                cancel_timer()

        self._pool.submit(decide, "approval handler")

    def close(self) -> None:
        """Stop the loop and the pool (tools still running are abandoned)."""
        with self._models_lock:
            if self._closed:
                return
            self._closed = True

        async def drain() -> None:
            # Clients being closed first: cancelling "every other task" would also cancel the
            # tasks those closes start (an inner model's close under a gather).
            await asyncio.gather(*self._closing, return_exceptions=True)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # Close the HTTP clients models opened on this loop (the models stay usable).
            with self._models_lock:
                models = [model for model, _ in self._models.values()]
                self._models.clear()
            await asyncio.gather(*(_close_model(m) for m in models))

        try:
            asyncio.run_coroutine_threadsafe(drain(), self._loop).result(timeout=5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            _log.warning("effects did not drain in 5 s")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        self._pool.close()


async def _close_model(model: Any) -> None:
    try:
        await model.aclose()
    except Exception as exc:
        _log.warning("closing a model's client failed", exc_info=exc)


class _ModelCall:
    """A model request in flight on the effects loop: its timeout, its cancel, its delivery.

    Whichever ends it (the reply, the timer, the run's cancel), the task's end delivers
    exactly one `ModelReplied`; the timer and the cancel only cancel the task.
    """

    __slots__ = ("_deliver", "_effect", "_loop", "_tasks", "_timed_out", "_timer", "_unregister")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        effect: CallModel,
        deliver: Deliver,
        task: asyncio.Future[Any],
        tasks: set[asyncio.Future[Any]],
    ) -> None:
        self._loop = loop
        self._effect = effect
        self._deliver = deliver
        self._tasks = tasks
        self._timed_out = False
        self._timer: asyncio.TimerHandle | None = None
        if effect.timeout is not None:
            self._timer = loop.call_later(effect.timeout, self._expire, task)
        # The token's callback may run on any thread: it only schedules the task's cancel.
        self._unregister = effect.request.cancellation.on_cancel(
            lambda _reason: self._cancel_soon(task)
        )
        task.add_done_callback(self._done)

    def _cancel_soon(self, task: asyncio.Future[Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs any more
            self._loop.call_soon_threadsafe(task.cancel)

    def _expire(self, task: asyncio.Future[Any]) -> None:
        self._timed_out = True
        task.cancel()

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if self._timer is not None:
            self._timer.cancel()
        self._unregister()
        effect = self._effect
        error: BaseException | None
        if task.cancelled():
            if self._timed_out:
                error = TimeoutError(f"model request timed out after {effect.timeout:g} s")
            else:
                error = Cancelled("cancelled")
        else:
            # Read even when the request was abandoned, so asyncio does not log it as lost.
            error = task.exception()
        if error is None:
            self._deliver(ModelReplied(effect.run_id, effect.step, response=task.result()))
        else:
            self._deliver(ModelReplied(effect.run_id, effect.step, error=error))
