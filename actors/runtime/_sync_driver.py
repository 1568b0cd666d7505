"""Driving an agent's state machine on the calling thread: no actors, no threads, no timers.

The same `AgentLoop` that runs inside a pykka actor runs here, with its effects carried out
inline and in order. Tests use it to check the loop itself, and to check that the actor
produces the same log.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
from collections import deque
from collections.abc import Mapping
from typing import Any

from actors.context._agent_context import AgentContext
from actors.context._events import Clock, system_clock
from actors.context._frozen import thaw
from actors.context._messages import UserMessage
from actors.context._result import RunResult
from actors.context._suspension import Answer
from actors.context._usage import Usage
from actors.exceptions import ActorsError, RunFailedError, UserError
from actors.loop._agent import Agent
from actors.loop._default_model import default_model_of, require_models, resolve_model
from actors.loop._loop import AgentLoop, TreeLimits
from actors.loop._outcome import outcome_of_error, outcome_of_return
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
from actors.models._model import Model
from actors.runtime._effects import ApprovalHandler, decide_approval

__all__ = ["SyncDriver"]


class SyncDriver:
    """Runs one agent (and its subagents) synchronously on the calling thread.

    Tool timeouts are not enforced here (nothing runs concurrently to enforce them); everything
    else — validation, retries, limits, updates, suspension, subagents — behaves as in a
    `Runtime`.

    Args:
        agent: The spec.
        tool_context: The static channel.
        metadata: The initial metadata.
        agent_id: The agent's id (the spec's name by default).
        clock: Where timestamps come from.
        limits: Tree limits.
        approval_handler: Decides approvals in process (see `Runtime.spawn`).
        default_model: The model of every agent of the tree whose spec names none (a `Model`,
            or a model string such as ``"test"``), as for `Runtime`: without it the
            ``ACTORS_DEFAULT_MODEL`` environment variable, and with neither a `UserError`.
            There is no silent fallback to a test model here either.
    """

    def __init__(
        self,
        agent: Agent[Any],
        *,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        clock: Clock = system_clock,
        limits: TreeLimits | None = None,
        approval_handler: ApprovalHandler | None = None,
        default_model: Model | str | None = None,
        _parent_id: str | None = None,
        _depth: int = 0,
    ) -> None:
        default = default_model_of(default_model)
        require_models(agent, default)
        self.context = AgentContext(
            agent_id or agent.name,
            name=agent.name,
            parent_id=_parent_id,
            metadata=metadata,
            max_iterations=agent.max_iterations,
            clock=clock,
        )
        self.loop = AgentLoop(
            agent,
            self.context,
            model=resolve_model(agent, default),
            tool_context=tool_context,
            depth=_depth,
            limits=limits,
            approval_handler=approval_handler is not None,
        )
        self._approval_handler = approval_handler
        self._default_model = default
        self._tool_context = tool_context
        self._clock = clock
        self._limits = limits
        self._children: dict[str, SyncDriver] = {}
        self._queue: deque[Input] = deque()
        self._outcome: tuple[RunResult[Any] | None, ActorsError | None] | None = None

    @property
    def children(self) -> dict[str, SyncDriver]:
        """The drivers of the subagents started so far, by id."""
        return dict(self._children)

    def run(self, prompt: str) -> RunResult[Any]:
        """Run on ``prompt`` to completion (or suspension); raise the run's error if it fails."""
        return self._drive(StartRun(prompt, "", reply="host"))

    def resume(self, answers: Mapping[str, Answer]) -> RunResult[Any]:
        """Answer open requests and drive the run on."""
        return self._drive(ResumeRun(dict(answers), reply="host"))

    def send(self, message: str) -> None:
        """Steer (see `AgentRef.send`)."""
        self._pump(Steer(UserMessage(content=message)))

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run in progress."""
        self._pump(CancelRun(reason))

    def _drive(self, first: Input) -> RunResult[Any]:
        self._outcome = None
        self._pump(first)
        assert self._outcome is not None, "the run neither finished nor suspended"
        result, error = self._outcome
        if error is not None:
            raise error
        assert result is not None
        return result

    def _pump(self, first: Input) -> None:
        self._queue.append(first)
        while self._queue:
            for effect in self.loop.handle(self._queue.popleft()):
                self._carry_out(effect)

    def _carry_out(self, effect: Effect) -> None:
        if isinstance(effect, CallModel):
            self._queue.append(self._call_model(effect))
        elif isinstance(effect, CallTool):
            self._queue.append(self._call_tool(effect))
        elif isinstance(effect, RunChild):
            self._queue.append(self._run_child(effect))
        elif isinstance(effect, ResumeChild):
            child = self._children[effect.child_id]
            self._queue.append(self._child_result(effect, lambda: child.resume(effect.answers)))
        elif isinstance(effect, CancelChild):
            if effect.child_id in self._children:
                self._children[effect.child_id].cancel(effect.reason)
        elif isinstance(effect, AskApproval):
            assert self._approval_handler is not None
            answer = decide_approval(self._approval_handler, effect.request)
            self._queue.append(ApprovalDecided(effect.run_id, effect.call_id, answer))
        elif isinstance(effect, Finish) and effect.reply == "host":
            self._outcome = (effect.result, effect.error)

    def _call_model(self, effect: CallModel) -> ModelReplied:
        respond = getattr(self.loop.model, "respond_inline", None)
        if respond is not None:  # an InlineModel: no event loop needed
            try:
                inline = respond(effect.request)
            except Exception as exc:
                return ModelReplied(effect.run_id, effect.step, error=exc)
            if inline is not None:
                return ModelReplied(effect.run_id, effect.step, response=inline)

        async def ask() -> Any:
            return await asyncio.wait_for(self.loop.model.request(effect.request), effect.timeout)

        try:
            response = asyncio.run(ask())
        except Exception as exc:
            return ModelReplied(effect.run_id, effect.step, error=exc)
        return ModelReplied(effect.run_id, effect.step, response=response)

    def _delegate(
        self, agent: Agent[Any], task: str, /, *, timeout: float
    ) -> concurrent.futures.Future[Any]:
        """``ctx.delegate`` here: the child runs inline, to its end, before the tool goes on."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        child_id, refusal = self.loop.begin_delegation(agent, task)
        if child_id is None:
            future.set_exception(UserError(f"delegation refused: {refusal}"))
            return future
        try:
            child = SyncDriver(
                agent,
                tool_context=self._tool_context,
                metadata=self.context.metadata,
                agent_id=child_id,
                clock=self._clock,
                limits=self._limits,
                approval_handler=self._approval_handler,
                default_model=self._default_model,
                _parent_id=self.context.agent_id,
                _depth=self.loop.depth + 1,
            )
            self._children[child_id] = child
            result = child.run(task)
        except ActorsError as exc:
            usage = getattr(exc, "usage", None)
            self.loop.end_delegation(
                child_id, "failed", usage or Usage(), f"{type(exc).__name__}: {exc}"
            )
            future.set_exception(exc)
            return future
        self.loop.end_delegation(child_id, result.status, result.tree_usage, None)
        if result.status == "completed":
            future.set_result(result.output)
        else:
            future.set_exception(
                RunFailedError(f"delegated agent {child_id!r} ended {result.status}")
            )
        return future

    def _call_tool(self, effect: CallTool) -> ToolFinished:
        ctx = dataclasses.replace(effect.ctx, _delegator=self._delegate)
        try:
            value = effect.tool.invoke(ctx, effect.arguments)
            if inspect.isawaitable(value):

                async def wait() -> Any:
                    return await value

                value = asyncio.run(wait())
            outcome = outcome_of_return(value)
        except Exception as exc:
            outcome = outcome_of_error(exc)
        return ToolFinished(effect.run_id, effect.call.id, outcome)

    def _run_child(self, effect: RunChild) -> ChildFinished:
        child = self._children.get(effect.child_id)
        if child is None:
            child = SyncDriver(
                effect.subagent.agent,
                tool_context=effect.tool_context,  # the loop's choice: forwarded or narrowed
                metadata=thaw(effect.metadata),
                agent_id=effect.child_id,
                clock=self._clock,
                limits=self._limits,
                approval_handler=self._approval_handler,
                default_model=self._default_model,
                _parent_id=self.context.agent_id,
                _depth=self.loop.depth + 1,
            )
            self._children[effect.child_id] = child
        return self._child_result(effect, lambda: child.run(effect.task))

    @staticmethod
    def _child_result(effect: RunChild | ResumeChild, work: Any) -> ChildFinished:
        try:
            result = work()
        except ActorsError as exc:
            usage = getattr(exc, "usage", None)
            return ChildFinished(
                effect.run_id, effect.call_id, effect.child_id, error=exc, **_usage(usage)
            )
        return ChildFinished(
            effect.run_id,
            effect.call_id,
            effect.child_id,
            result=result,
            tree_usage=result.tree_usage,
        )


def _usage(usage: Any) -> dict[str, Any]:
    return {"tree_usage": usage} if usage is not None else {}
