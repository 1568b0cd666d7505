"""`AgentCell`: one agent's loop as every host runs it.

The cell is the part of an agent that does not depend on where it runs. It applies one input
at a time to the `AgentLoop`, writes the step's events ahead of its effects, hands the effects
to its `Host`, and answers whoever waits for a run (the host's caller, a parent's call, a
parent's tool that delegated). It catches everything: an exception escaping a pykka ``tell``
handler would stop the actor silently and leave its callers waiting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from actors._logging import get_logger
from actors._safe import exception_text
from actors.context._usage import Usage
from actors.exceptions import (
    AgentStoppedError,
    FencedWriteError,
    RunError,
    RunFailedError,
    RunTimeoutError,
)
from actors.host._messages import (
    Ask,
    Delegate,
    DelegateDone,
    DelegateReply,
    ExpireRun,
    HostReply,
    OpenStream,
    ParentReply,
    PeerBatch,
    Query,
    Reply,
    settle,
)
from actors.host._node import AgentNode
from actors.host._observer import notify_release
from actors.host._persist import snapshot_if_due
from actors.loop._loop import AgentLoop
from actors.loop._outcome import outcome_of_error
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
    PeerMessage,
    ResumeChild,
    ResumeRun,
    RunChild,
    SendMessage,
    StartRun,
    Steer,
    ToolFinished,
)

__all__ = ["AgentCell"]

_log = get_logger("actors.agent")

_FINAL = frozenset({"finished", "failed", "cancelled"})

_RUNS = (StartRun, ResumeRun)  # inputs that bring a reply to wait for
_INPUTS = (
    StartRun,
    ModelReplied,
    ToolFinished,
    ChildFinished,
    CancelRun,
    ResumeRun,
    Steer,
    ApprovalDecided,
    PeerMessage,
)


class Host(Protocol):
    """What an `AgentCell` asks of the host that runs it.

    Every method is called from the agent's own turn and must not block: work starts here and
    its completion comes back later as a message to the agent (``cell.deliver``).
    """

    @property
    def closing(self) -> bool:
        """Whether the host is shutting down (agents keep their stored status)."""
        ...

    #: Events between snapshots of an agent's fold in its store, or None for none.
    snapshot_every: int | None

    def persist(self, node: AgentNode) -> None:
        """Write the agent's buffered events and its status; raise `StoreError` on failure."""
        ...

    def call_model(self, cell: AgentCell, effect: CallModel) -> None:
        """Start a model request; deliver `ModelReplied`."""
        ...

    def call_tool(self, cell: AgentCell, effect: CallTool) -> None:
        """Start a tool call; deliver `ToolFinished`."""
        ...

    def call_approval(self, cell: AgentCell, effect: AskApproval) -> None:
        """Ask the in-process approval handler; deliver `ApprovalDecided`."""
        ...

    def run_child(self, cell: AgentCell, effect: RunChild) -> None:
        """Spawn (or reuse a kept) child and start its run; its end arrives as `ChildFinished`."""
        ...

    def resume_child(self, cell: AgentCell, effect: ResumeChild) -> None:
        """Route answers down to a suspended child."""
        ...

    def cancel_agent(self, agent_id: str, reason: str) -> None:
        """Cancel an agent's run in progress (its descendants follow)."""
        ...

    def start_delegation(self, cell: AgentCell, message: Delegate) -> None:
        """Spawn a child for a tool's ``ctx.delegate``; its end arrives as `DelegateDone`."""
        ...

    def tell(self, agent_id: str, message: Any) -> None:
        """Send ``message`` to another agent of this host (a parent), if it is still there."""
        ...

    def peer_exists(self, agent_id: str) -> bool:
        """Whether a peer message to ``agent_id`` can be delivered (live, or asleep)."""
        ...

    def send_peer(self, cell: AgentCell, effect: SendMessage) -> None:
        """Deliver a logged peer message to its receiver as a `PeerMessage` input."""
        ...

    def child_done(self, node: AgentNode, effect: Finish) -> None:
        """A child answered its parent: stop it unless it is kept or waits on a request."""
        ...

    def agent_stopped(self, node: AgentNode) -> None:
        """The agent's cell was released: it no longer counts as live."""
        ...


class AgentCell:
    """One agent's loop, its write-ahead, and the runs waiting on it.

    Args:
        host: Where its effects run.
        node: The host's record of the agent.
        loop: Its state machine (fresh, or rebuilt from a log).
        deliver: Puts an input in this agent's own mailbox (for effects' completions).
    """

    __slots__ = (
        "deliver",
        "fenced",
        "host",
        "log",
        "loop",
        "node",
        "passivating",
        "timed_out",
        "waiting",
    )

    def __init__(
        self, host: Host, node: AgentNode, loop: AgentLoop, deliver: Callable[[Any], None]
    ) -> None:
        self.host = host
        self.node = node
        self.loop = loop
        self.deliver = deliver
        self.waiting: list[Reply] = []
        # Runs a parent's deadline cancelled: their end is reported as this timeout, once.
        self.timed_out: dict[Reply, RunTimeoutError] = {}
        self.log = _log.bind(
            agent_id=node.agent_id, parent_id=node.parent_id, session_id=node.session_id
        )
        self.passivating = False  # the next stop puts the agent to sleep in its store
        self.fenced = False  # another host took the agent over: it must start nothing more
        loop.ctx.set_gate(node)

    @property
    def idle(self) -> bool:
        """Whether nothing is in flight: no run, or a suspended one waiting on the host."""
        return not self.waiting and self.loop.status in ("idle", "suspended")

    # -- messages -----------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        """Handle one message; the return value answers an ``ask``."""
        if isinstance(message, _INPUTS):
            self.handle(message)
            return None
        if isinstance(message, PeerBatch):
            self.handle_peers(message)
            return None
        if isinstance(message, Query):
            return self._answer(message.what)
        if isinstance(message, Ask):
            try:
                settle(message.future, result=self.receive(message.message))
            except Exception as exc:
                settle(message.future, error=exc)
            return None
        if isinstance(message, Delegate):
            try:
                self.host.start_delegation(self, message)
            except Exception as exc:
                self.log.exception("delegation failed")
                settle(message.future, error=exc)
            return None
        if isinstance(message, OpenStream):
            message.closer.append(self.node.tree.open_stream(self.node.agent_id, message.stream))
            return None
        if isinstance(message, ExpireRun):
            self._expire(message)
            return None
        if isinstance(message, DelegateDone):
            self._delegate_done(message)
            return None
        self.log.warning("unknown message ignored", message_type=type(message).__name__)
        return None

    def handle(self, message: Input) -> None:
        """Apply one input to the loop, write ahead, carry out its effects."""
        loop = self.loop
        if isinstance(message, _RUNS) and message.reply is not None:
            self.waiting.append(message.reply)
        elif type(message) is ChildFinished and self.node.tree.streams:
            self._announce(message)
        try:
            effects = loop.handle(message)
        except Exception as exc:  # a bug in the loop must not strand callers
            self.log.exception("agent loop failed")
            effects = self._crash(exc)
        self._commit(effects)

    def handle_peers(self, batch: PeerBatch) -> None:
        """Apply peer messages in order, then write them ahead and carry out their effects once."""
        effects: list[Effect] = []
        for message in batch.messages:
            try:
                effects.extend(self.loop.handle(message))
            except Exception as exc:  # a bug in the loop must not strand callers
                self.log.exception("agent loop failed")
                effects.extend(self._crash(exc))
        self._commit(effects)

    def _commit(self, effects: list[Effect]) -> None:
        loop = self.loop
        self._sync_node()
        # Write-ahead: the events that announce an effect (a tool_call, a subagent_spawned) are
        # durable before the effect starts, so a crash can never hide a side effect.
        stored = self.node.tree.store is not None
        if stored and not self.persist() and loop.run_id is not None:
            effects = self._store_failed(effects)
        self._execute(effects)
        if stored:
            self.persist()

    def _announce(self, message: ChildFinished) -> None:
        """Stream a child's end when it comes, not when the parent's whole step ends."""
        try:
            status = self.loop.child_ending(message)
            if status is not None:
                self.node.announce_child_end(message.child_id, status)
        except Exception:  # a stream must never break the agent
            self.log.exception("could not stream a child's end", child_id=message.child_id)

    def _store_failed(self, effects: list[Effect]) -> list[Effect]:
        """The store refused this step's events: start no tool or child whose call is unwritten."""
        # A budgeted request too: its reservation must be durable before it is sent, or a
        # crash would forget what the provider may charge for it.
        started: tuple[type[Effect], ...] = (CallTool, RunChild, ResumeChild, SendMessage)
        if self.loop.budgeted or self.fenced:
            # Fenced: another host took the agent over, and this one must not even ask the
            # model (a run that starts here would run twice).
            started = (*started, CallModel)
        if not any(isinstance(e, started) for e in effects):
            return effects
        error = RunFailedError(
            f"agent {self.node.agent_id!r}: the session store could not write this "
            "step's events, so its tools, subagents, messages (and budgeted model requests) "
            "were not started; see the log"
            if not self.fenced
            else f"agent {self.node.agent_id!r} was taken over by another host (it fenced "
            "the agent in the store): this host may not write it, so it started nothing of "
            "this step; the agent lives on the other host now"
        )
        for effect in effects:
            if isinstance(effect, CallModel):  # never sent: its reservation is released
                self.loop.unsent(effect)
        try:
            return self.loop.fail_now(error)
        except Exception:
            self.log.exception("could not fail the run cleanly")
            return [Finish(reply, error=error) for reply in list(self.waiting)]

    def persist(self) -> bool:
        """Write what is buffered; False (and logged) when the store failed."""
        if self.node.tree.store is None:
            return True  # nothing is ever buffered (a hot path: asked twice per input)
        try:
            self.host.persist(self.node)
        except FencedWriteError:
            self.fenced = True
            self.log.warning("another host took this agent over: its events are refused")
            return False
        except Exception:
            self.log.exception("could not persist events; they stay buffered")
            return False
        # One comparison in the common case: a snapshot is due every `snapshot_every` events.
        snapshot_if_due(self.node, self.loop.ctx, self.host.snapshot_every)
        return True

    def _crash(self, exc: Exception) -> list[Effect]:
        error = RunFailedError(
            f"agent {self.node.agent_id!r} failed internally: {exception_text(exc)}"
        )
        error.__cause__ = exc
        loop = self.loop
        try:
            if loop.run_id is not None:
                return loop.fail_now(error)
        except Exception:
            self.log.exception("agent loop could not fail the run cleanly")
        return [Finish(reply, error=error) for reply in list(self.waiting)]

    def _answer(self, what: str) -> Any:
        if what == "context":
            return self.loop.ctx.serialize()
        if what == "status":
            return self.loop.status
        if what == "idle":
            return self.idle
        raise ValueError(f"unknown query {what!r}")

    def _sync_node(self) -> None:
        loop = self.loop
        node = self.node
        status = loop.status
        if status != "idle" or node.status not in _FINAL:
            # A finished child stays "finished" while late messages (an abandoned model
            # call's reply) drain before it stops; a new task makes it active again.
            node.status = status
        node.step = loop.ctx.iteration
        node.tool = loop.current_tool

    # -- effects ------------------------------------------------------------------------------

    def _execute(self, effects: list[Effect]) -> None:
        host = self.host
        for effect in effects:
            try:
                if isinstance(effect, CallModel):
                    host.call_model(self, effect)
                elif isinstance(effect, CallTool):
                    host.call_tool(self, effect)
                elif isinstance(effect, Finish):  # the common ones first: one check each
                    self._finish(effect)
                elif isinstance(effect, SendMessage):
                    host.send_peer(self, effect)
                elif isinstance(effect, RunChild):
                    host.run_child(self, effect)
                elif isinstance(effect, ResumeChild):
                    host.resume_child(self, effect)
                elif isinstance(effect, AskApproval):
                    host.call_approval(self, effect)
                elif isinstance(effect, CancelChild):
                    host.cancel_agent(effect.child_id, effect.reason)
            except Exception as exc:
                self.log.exception("effect failed", effect=type(effect).__name__)
                self._effect_failed(effect, exc)

    def _effect_failed(self, effect: Effect, exc: Exception) -> None:
        if isinstance(effect, CallModel):
            self.deliver(ModelReplied(effect.run_id, effect.step, error=exc))
        elif isinstance(effect, CallTool):
            self.deliver(ToolFinished(effect.run_id, effect.call.id, outcome_of_error(exc)))
        elif isinstance(effect, RunChild | ResumeChild):
            self.deliver(ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=exc))

    def _finish(self, effect: Finish) -> None:
        reply = effect.reply
        if reply in self.waiting:
            self.waiting.remove(reply)
        if self.node.announced is not None:
            self.node.forget_announced()  # the run's children's ends are all logged by now
        timed_out = self.timed_out.pop(reply, None)
        if timed_out is not None:
            # The parent hears one answer: the timeout, with the usage the child had spent.
            if effect.result is not None:
                timed_out.messages = effect.result.messages
                timed_out.usage = effect.result.tree_usage
            elif isinstance(effect.error, RunError):
                timed_out.messages, timed_out.usage = effect.error.messages, effect.error.usage
            effect = dataclasses.replace(effect, result=None, error=timed_out)
        self._sync_node()
        if not self.persist() and effect.error is None:
            # A result is never reported before it is on disk.
            error = RunFailedError(
                f"agent {self.node.agent_id!r}: the run ended but its events could not "
                "be written to the session store; see the log"
            )
            effect = dataclasses.replace(effect, result=None, error=error)
        if isinstance(reply, HostReply):
            settle(reply.future, result=effect.result, error=effect.error)
        elif isinstance(reply, ParentReply):
            result = effect.result
            tree = result.tree_usage if result is not None else _usage_of(effect)
            self.host.tell(
                reply.parent_id,
                ChildFinished(
                    reply.run_id,
                    reply.call_id,
                    reply.child_id,
                    result=result,
                    error=effect.error,
                    tree_usage=tree,
                ),
            )
            # The child's status in the tree is what its parent heard: a timed-out child failed
            # (its run was cancelled to stop it; the parent's subagent_finished says failed).
            self.host.child_done(self.node, effect)
        elif isinstance(reply, DelegateReply):
            result = effect.result
            tree = result.tree_usage if result is not None else _usage_of(effect)
            self.host.tell(reply.parent_id, DelegateDone(reply, result, effect.error, tree))
            self.host.child_done(self.node, effect)

    def _expire(self, message: ExpireRun) -> None:
        reply = message.reply
        if not any(waiting is reply for waiting in self.waiting):
            # That run already ended: a kept child may be on another task, a suspended one
            # resumed under a deadline of its own (its reply equal, but not the same object).
            return
        error = RunTimeoutError(
            f"subagent {reply.child_id!r} timed out after {message.timeout:g} s",
            agent_id=reply.child_id,
        )
        # Cancel the run and report its end as the timeout: one answer, carrying the usage the
        # child spent (answering first and cancelling after told the parent twice).
        self.timed_out[reply] = error
        self.handle(CancelRun(f"timed out after {message.timeout:g} s"))
        if self.timed_out.pop(reply, None) is None:
            return  # the cancelled run's end carried the timeout
        if reply in self.waiting:
            self.waiting.remove(reply)
        if isinstance(reply, ParentReply):
            self.host.tell(
                reply.parent_id,
                ChildFinished(reply.run_id, reply.call_id, reply.child_id, error=error),
            )
        else:
            self.host.tell(reply.parent_id, DelegateDone(reply, None, error, Usage()))

    def _delegate_done(self, message: DelegateDone) -> None:
        result, error, future = message.result, message.error, message.reply.future
        status = result.status if result is not None else "failed"
        detail = exception_text(error) if error is not None else None
        try:
            self.loop.end_delegation(message.reply.child_id, status, message.tree_usage, detail)
        except Exception:
            self.log.exception("could not book the delegated child's end")
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

    # -- lifecycle ----------------------------------------------------------------------------

    def release(self, how: str) -> None:
        """The agent stops (stopped, failed, or passivated): answer every waiter, and go.

        What is left is written, and the host forgets the agent.
        """
        node = self.node
        if self.passivating:
            how = "passivated"
            self.loop.ctx._record("passivated", {"status": node.status})
        if self.host.closing or how == "passivated":
            pass  # the agent keeps its status in the store: the host went away, not the agent
        elif node.status not in _FINAL:
            node.status = "stopped" if how == "stopped" else "failed"
        try:
            self.loop.token_cancel(f"agent {how}")
        except Exception:
            self.log.exception("could not cancel the run in flight")
        for reply in self.waiting:
            error = AgentStoppedError(f"agent {node.agent_id!r} {how} before its run finished")
            if isinstance(reply, HostReply):
                settle(reply.future, error=error)
            elif isinstance(reply, ParentReply):
                self.host.tell(
                    reply.parent_id,
                    ChildFinished(reply.run_id, reply.call_id, reply.child_id, error=error),
                )
            else:
                self.host.tell(reply.parent_id, DelegateDone(reply, None, error, Usage()))
        self.waiting.clear()
        if self.persist() and how == "passivated":
            # The wake reads this snapshot and the few events after it, not the whole log.
            every = self.host.snapshot_every
            snapshot_if_due(node, self.loop.ctx, every, passivating=True)
        notify_release(node, how)
        self.host.agent_stopped(node)


def _usage_of(effect: Finish) -> Usage:
    usage = getattr(effect.error, "usage", None)
    return usage if isinstance(usage, Usage) else Usage()
