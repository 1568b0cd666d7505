"""The pykka actor that hosts one agent's state machine and carries out its effects."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pykka

from actors._logging import get_logger
from actors._safe import exception_text
from actors.context._events import Event
from actors.context._result import RunResult
from actors.context._usage import Usage
from actors.exceptions import AgentStoppedError, RunError, RunFailedError, RunTimeoutError
from actors.loop._agent import Agent
from actors.loop._loop import AgentLoop
from actors.loop._types import (
    ApprovalDecided,
    AskApproval,
    CallModel,
    CallTool,
    CancelChild,
    CancelRun,
    ChildFinished,
    Effect,
    Finish,
    Input,
    ModelReplied,
    ResumeChild,
    ResumeRun,
    RunChild,
    StartRun,
    Steer,
    ToolFinished,
)
from actors.models._model import StreamDelta

if TYPE_CHECKING:
    from pykka._actor import ActorInbox  # pykka's protocol of an inbox (typing only)
    from pykka._envelope import Envelope

    from actors.runtime._node import AgentNode
    from actors.runtime._runtime import Runtime

__all__ = [
    "AgentActor",
    "Delegate",
    "DelegateDone",
    "DelegateReply",
    "HostReply",
    "ParentReply",
    "Query",
]

_log = get_logger("actors.actor")

_FINAL = frozenset({"finished", "failed", "cancelled"})


def settle(
    future: concurrent.futures.Future[Any],
    *,
    result: Any = None,
    error: BaseException | None = None,
) -> None:
    """Resolve ``future`` once.

    A future its waiter already cancelled (an abandoned ``await``, an async tool that timed out)
    is left as it is: raising here would kill the actor silently.
    """
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


_POOL_LOCK = threading.Lock()
_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _agent_threads() -> concurrent.futures.ThreadPoolExecutor:
    """The threads agents run on (created on first use, grown on demand, reused)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            # As many workers as the kernel allows threads: one per live agent at most.
            _POOL = concurrent.futures.ThreadPoolExecutor(
                max_workers=1 << 16, thread_name_prefix="actors-agent"
            )
        return _POOL


_INPUTS = (
    StartRun,
    ModelReplied,
    ToolFinished,
    ChildFinished,
    CancelRun,
    ResumeRun,
    Steer,
    ApprovalDecided,
)


@dataclass(frozen=True, slots=True)
class HostReply:
    """The host waits on ``future`` for the run's result."""

    future: concurrent.futures.Future[Any]


@dataclass(frozen=True, slots=True)
class ParentReply:
    """A parent's call waits for this child's run."""

    parent: pykka.ActorRef[Any]
    run_id: str
    call_id: str
    child_id: str


@dataclass(frozen=True, slots=True)
class Delegate:
    """A tool asked its agent to run a child (``ctx.delegate``)."""

    agent: Agent[Any]
    task: str
    future: concurrent.futures.Future[Any]
    metadata: Mapping[str, Any]
    timeout: float


@dataclass(frozen=True, slots=True)
class DelegateReply:
    """A tool of the parent waits on ``future`` for this delegated child's output."""

    parent: pykka.ActorRef[Any]
    child_id: str
    future: concurrent.futures.Future[Any]


@dataclass(frozen=True, slots=True)
class DelegateDone:
    """A delegated child finished; the parent books it and answers the waiting tool."""

    reply: DelegateReply
    result: RunResult[Any] | None
    error: BaseException | None
    tree_usage: Usage


@dataclass(frozen=True, slots=True)
class ExpireRun:
    """A parent's deadline for one run of this child passed."""

    reply: ParentReply | DelegateReply
    timeout: float


@dataclass(frozen=True, slots=True)
class Query:
    """A question answered from the actor's thread (``ask``)."""

    what: str


class AgentActor(pykka.ThreadingActor):
    """Hosts an `AgentLoop`: inputs arrive as messages, effects leave as tasks and messages.

    Every handler catches everything: an exception escaping a pykka ``tell`` handler would stop
    the actor silently and leave callers waiting.
    """

    def _start_actor_loop(self) -> None:
        # An agent still owns one thread while it lives, but threads are reused after agents
        # stop: starting an OS thread costs ~0.3 ms (more with thousands alive), and a fan-out
        # starts hundreds of short-lived children. The pool's workers are joined at exit like
        # pykka's non-daemon threads, so a process still waits for its live agents.
        _agent_threads().submit(self._actor_loop)

    @staticmethod
    def _create_actor_inbox() -> ActorInbox:
        # pykka only puts, gets and asks if empty: a SimpleQueue does that with less locking
        # than queue.Queue (measured: an ask round trip 29.6 -> 24.5 us).
        inbox: queue.SimpleQueue[Envelope[Any]] = queue.SimpleQueue()
        return inbox

    def __init__(self, runtime: Runtime, node: AgentNode, loop: AgentLoop) -> None:
        super().__init__()
        self.actors_runtime = runtime
        self.actors_node = node
        self.actors_loop = loop
        self.actors_waiting: list[Any] = []
        # Runs a parent's deadline cancelled: their end is reported as this timeout, once.
        self.actors_timed_out: dict[Any, RunTimeoutError] = {}
        self.actors_log = _log.bind(
            agent_id=node.agent_id, parent_id=node.parent_id, session_id=node.session_id
        )
        loop.ctx.subscribe(self._on_event)

    # -- messages -----------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _INPUTS):
            self._handle(message)
            return None
        if isinstance(message, Query):
            return self._answer(message.what)
        if isinstance(message, Delegate):
            try:
                self.actors_runtime.start_delegation(
                    self.actors_node, self.actor_ref, self.actors_loop, message
                )
            except Exception as exc:
                self.actors_log.exception("delegation failed")
                settle(message.future, error=exc)
            return None
        if isinstance(message, ExpireRun):
            self._expire(message)
            return None
        if isinstance(message, DelegateDone):
            self._delegate_done(message)
            return None
        if isinstance(message, StreamDelta):
            self.actors_node.publish_delta(message)
            return None
        self.actors_log.warning("unknown message ignored", message_type=type(message).__name__)
        return None

    def _handle(self, message: Input) -> None:
        loop = self.actors_loop
        if isinstance(message, StartRun | ResumeRun) and message.reply is not None:
            self.actors_waiting.append(message.reply)
        try:
            effects = loop.handle(message)
        except Exception as exc:  # a bug in the loop must not strand callers
            self.actors_log.exception("agent loop failed")
            effects = self._crash(exc)
        self._sync_node()
        # Write-ahead: the events that announce an effect (a tool_call, a subagent_spawned) are
        # durable before the effect starts, so a crash can never hide a side effect.
        if not self._persist() and loop.run_id is not None:
            effects = self._store_failed(effects)
        self._execute(effects)
        self._persist()

    def _store_failed(self, effects: list[Effect]) -> list[Effect]:
        """The store refused this step's events: start no tool or child whose call is unwritten."""
        if not any(isinstance(e, CallTool | RunChild | ResumeChild) for e in effects):
            return effects
        error = RunFailedError(
            f"agent {self.actors_node.agent_id!r}: the session store could not write this "
            "step's events, so its tools and subagents were not started; see the log"
        )
        try:
            return self.actors_loop.fail_now(error)
        except Exception:
            self.actors_log.exception("could not fail the run cleanly")
            return [Finish(reply, error=error) for reply in list(self.actors_waiting)]

    def _persist(self) -> bool:
        try:
            self.actors_runtime.persist(self.actors_node)
        except Exception:
            self.actors_log.exception("could not persist events; they stay buffered")
            return False
        return True

    def _crash(self, exc: Exception) -> list[Effect]:
        error = RunFailedError(
            f"agent {self.actors_node.agent_id!r} failed internally: {exception_text(exc)}"
        )
        error.__cause__ = exc
        loop = self.actors_loop
        try:
            if loop.run_id is not None:
                return loop.fail_now(error)
        except Exception:
            self.actors_log.exception("agent loop could not fail the run cleanly")
        return [Finish(reply, error=error) for reply in list(self.actors_waiting)]

    def _answer(self, what: str) -> Any:
        if what == "context":
            return self.actors_loop.ctx.serialize()
        if what == "status":
            return self.actors_loop.status
        raise ValueError(f"unknown query {what!r}")

    def _on_event(self, event: Event) -> None:
        self.actors_node.publish_event(event)

    def _sync_node(self) -> None:
        loop = self.actors_loop
        node = self.actors_node
        if loop.status != "idle" or node.status not in _FINAL:
            # A finished child stays "finished" while late messages (an abandoned model
            # call's reply) drain before it stops; a new task makes it active again.
            node.status = loop.status
        node.step = loop.ctx.iteration
        node.tool = loop.current_tool

    # -- effects ------------------------------------------------------------------------------

    def _deliver(self, message: Input) -> None:
        # Called from effect threads. An agent stopped meanwhile has nobody left to tell.
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(message)

    def _execute(self, effects: list[Effect]) -> None:
        runtime = self.actors_runtime
        for effect in effects:
            try:
                if isinstance(effect, CallModel) and self._answer_inline(effect):
                    pass
                elif isinstance(effect, CallModel):
                    if self.actors_node.wants_deltas():
                        request = dataclasses.replace(effect.request, on_delta=self.actor_ref.tell)
                        effect = dataclasses.replace(effect, request=request)
                    runtime.effects.call_model(effect, self.actors_loop.model, self._deliver)
                elif isinstance(effect, CallTool):
                    delegator = runtime.delegator_for(self.actors_node, effect)
                    runtime.effects.call_tool(effect, self._deliver, delegator)
                elif isinstance(effect, RunChild):
                    runtime.run_child(self.actors_node, self.actor_ref, effect)
                elif isinstance(effect, ResumeChild):
                    runtime.resume_child(self.actor_ref, effect)
                elif isinstance(effect, AskApproval):
                    handler = self.actors_node.approval_handler
                    assert handler is not None
                    runtime.effects.call_approval(effect, handler, self._deliver)
                elif isinstance(effect, CancelChild):
                    runtime.cancel_agent(effect.child_id, effect.reason)
                elif isinstance(effect, Finish):
                    self._finish(effect)
            except Exception as exc:
                self.actors_log.exception("effect failed", effect=type(effect).__name__)
                self._effect_failed(effect, exc)

    def _answer_inline(self, effect: CallModel) -> bool:
        """Let a model that can answer at once do so here, with no trip through the loop."""
        respond = getattr(self.actors_loop.model, "respond_inline", None)
        if respond is None:
            return False
        try:
            response = respond(effect.request)
        except Exception as exc:  # a scripted failure: a value for the agent, as over the loop
            self._deliver(ModelReplied(effect.run_id, effect.step, error=exc))
            return True
        if response is None:
            return False
        self._deliver(ModelReplied(effect.run_id, effect.step, response=response))
        return True

    def _effect_failed(self, effect: Effect, exc: Exception) -> None:
        if isinstance(effect, CallModel):
            self._deliver(ModelReplied(effect.run_id, effect.step, error=exc))
        elif isinstance(effect, CallTool):
            from actors.loop._outcome import outcome_of_error

            self._deliver(ToolFinished(effect.run_id, effect.call.id, outcome_of_error(exc)))
        elif isinstance(effect, RunChild | ResumeChild):
            self._deliver(ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=exc))

    def _finish(self, effect: Finish) -> None:
        reply = effect.reply
        if reply in self.actors_waiting:
            self.actors_waiting.remove(reply)
        ended = effect  # how the run ended, for the child's own status
        timed_out = self.actors_timed_out.pop(reply, None)
        if timed_out is not None:
            # The parent hears one answer: the timeout, with the usage the child had spent.
            if effect.result is not None:
                timed_out.messages = effect.result.messages
                timed_out.usage = effect.result.tree_usage
            elif isinstance(effect.error, RunError):
                timed_out.messages, timed_out.usage = effect.error.messages, effect.error.usage
            effect = dataclasses.replace(effect, result=None, error=timed_out)
        self._sync_node()
        if not self._persist() and effect.error is None:
            # A result is never reported before it is on disk.
            error = RunFailedError(
                f"agent {self.actors_node.agent_id!r}: the run ended but its events could not "
                "be written to the session store; see the log"
            )
            effect = dataclasses.replace(effect, result=None, error=error)
        if isinstance(reply, HostReply):
            settle(reply.future, result=effect.result, error=effect.error)
        elif isinstance(reply, ParentReply):
            result = effect.result
            tree = result.tree_usage if result is not None else self._usage_of(effect)
            self._tell_parent(
                reply,
                ChildFinished(
                    reply.run_id,
                    reply.call_id,
                    reply.child_id,
                    result=result,
                    error=effect.error,
                    tree_usage=tree,
                ),
            )
            self.actors_runtime.child_done(self.actors_node, ended)
        elif isinstance(reply, DelegateReply):
            result = effect.result
            tree = result.tree_usage if result is not None else self._usage_of(effect)
            self._tell_parent(reply, DelegateDone(reply, result, effect.error, tree))
            self.actors_runtime.child_done(self.actors_node, ended)

    def _expire(self, message: ExpireRun) -> None:
        reply = message.reply
        if not any(waiting is reply for waiting in self.actors_waiting):
            # That run already ended: a kept child may be on another task, a suspended one
            # resumed under a deadline of its own (its reply equal, but not the same object).
            return
        error = RunTimeoutError(
            f"subagent {reply.child_id!r} timed out after {message.timeout:g} s",
            agent_id=reply.child_id,
        )
        # Cancel the run and report its end as the timeout: one answer, carrying the usage the
        # child spent (answering first and cancelling after told the parent twice).
        self.actors_timed_out[reply] = error
        self._handle(CancelRun(f"timed out after {message.timeout:g} s"))
        if self.actors_timed_out.pop(reply, None) is None:
            return  # the cancelled run's end carried the timeout
        if reply in self.actors_waiting:
            self.actors_waiting.remove(reply)
        if isinstance(reply, ParentReply):
            self._tell_parent(
                reply, ChildFinished(reply.run_id, reply.call_id, reply.child_id, error=error)
            )
        else:
            self._tell_parent(reply, DelegateDone(reply, None, error, Usage()))

    def _tell_parent(self, reply: ParentReply | DelegateReply, message: Any) -> None:
        # A parent stopped first (a tree being stopped top-down) has nobody left to tell.
        with contextlib.suppress(pykka.ActorDeadError):
            reply.parent.tell(message)

    def _delegate_done(self, message: DelegateDone) -> None:
        result, error, future = message.result, message.error, message.reply.future
        status = result.status if result is not None else "failed"
        detail = exception_text(error) if error is not None else None
        try:
            self.actors_loop.end_delegation(
                message.reply.child_id, status, message.tree_usage, detail
            )
        except Exception:
            self.actors_log.exception("could not book the delegated child's end")
        if error is not None:
            settle(future, error=error)
        elif result is None or result.status != "completed":
            settle(
                future,
                error=RunFailedError(
                    f"delegated agent {message.reply.child_id!r} ended {status}; "
                    "suspension inside delegate() is not supported"
                ),
            )
        else:
            settle(future, result=result.output)

    @staticmethod
    def _usage_of(effect: Finish) -> Usage:
        usage = getattr(effect.error, "usage", None)
        return usage if isinstance(usage, Usage) else Usage()

    # -- lifecycle ----------------------------------------------------------------------------

    def on_stop(self) -> None:
        self._release("stopped")

    def on_failure(self, *args: Any) -> None:
        self._release("failed")

    def _release(self, how: str) -> None:
        node = self.actors_node
        if self.actors_runtime.closing:
            pass  # the agent keeps its status in the store: the runtime went away, not the agent
        elif node.status not in ("finished", "failed", "cancelled"):
            node.status = "stopped" if how == "stopped" else "failed"
        try:
            self.actors_loop.token_cancel(f"agent {how}")
        except Exception:
            self.actors_log.exception("could not cancel the run in flight")
        for reply in self.actors_waiting:
            error = AgentStoppedError(f"agent {node.agent_id!r} {how} before its run finished")
            if isinstance(reply, HostReply):
                settle(reply.future, error=error)
            elif isinstance(reply, ParentReply):
                self._tell_parent(
                    reply, ChildFinished(reply.run_id, reply.call_id, reply.child_id, error=error)
                )
            elif isinstance(reply, DelegateReply):
                self._tell_parent(reply, DelegateDone(reply, None, error, Usage()))
        self.actors_waiting.clear()
        self._persist()
        self.actors_runtime.forget(node)
