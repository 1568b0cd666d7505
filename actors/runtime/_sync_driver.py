"""Driving an agent on the calling thread: no actors, no threads, no timers.

The same `AgentCell` (and so the same `AgentLoop`) that runs inside a pooled pykka actor runs
here on an `InlineHost`, with its effects carried out inline and in order. Tests use it to
check the loop itself, and to check that the actor produces the same log.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any

from actors.context._agent_context import AgentContext
from actors.context._events import Clock, Event, system_clock
from actors.context._messages import user_message
from actors.context._parts import ContentInput, coerce_content
from actors.context._result import RunResult
from actors.context._suspension import Answer
from actors.exceptions import RunFailedError
from actors.host._approval import ApprovalHandler
from actors.host._inline import InlineHost
from actors.host._messages import HostReply
from actors.host._node import new_root
from actors.host._tombstone import TreeNode
from actors.loop._agent import Agent
from actors.loop._default_model import default_model_of, require_models
from actors.loop._loop import AgentLoop, TreeLimits
from actors.loop._toolset_host import ToolsetHost, toolsets_of_tree
from actors.loop._types import CancelRun, ResumeRun, StartRun, Steer
from actors.models._model import Model

__all__ = ["SyncDriver"]


class SyncDriver:
    """Runs one agent (and its subagents) synchronously on the calling thread.

    Tool timeouts are not enforced here (nothing runs concurrently to enforce them), except
    for the tools of MCP servers; everything else — validation, retries, limits, updates,
    suspension, subagents, toolsets — behaves as in a `Runtime`. An agent with toolsets (MCP
    servers) gets an event loop thread for them: `close` the driver (or use it as a context
    manager) to stop them.

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
    ) -> None:
        agent_id = agent_id or agent.name
        default = default_model_of(default_model)
        require_models(agent, default)  # before any toolset (an MCP server) is opened
        self._own_toolsets: ToolsetHost | None = None
        if toolsets_of_tree(agent):
            self._own_toolsets = ToolsetHost.with_own_loop()
            try:
                self._own_toolsets.prepare(agent)  # the calling thread may block: open, list
            except BaseException:
                self._own_toolsets.close()
                raise
        self._host = InlineHost(
            clock=clock,
            limits=limits,
            approval_handler=approval_handler,
            default_model=default,
            toolsets=self._own_toolsets,
        )
        node, context = new_root(
            agent_id, agent, metadata, tool_context, clock, approval_handler=approval_handler
        )
        self._id = agent_id
        self._host.add(node, context)

    @classmethod
    def _view(cls, host: InlineHost, agent_id: str) -> SyncDriver:
        driver = cls.__new__(cls)
        driver._host = host
        driver._id = agent_id
        driver._own_toolsets = None
        return driver

    def close(self) -> None:
        """Stop the toolsets (MCP servers) this driver opened; idempotent."""
        if self._own_toolsets is not None:
            self._own_toolsets.close()

    def __enter__(self) -> SyncDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def context(self) -> AgentContext:
        """The agent's live context."""
        return self.loop.ctx

    @property
    def loop(self) -> AgentLoop:
        """The agent's state machine."""
        return self._host.cells[self._id].loop

    @property
    def children(self) -> dict[str, SyncDriver]:
        """The subagents started so far, by id (each a driver of its own)."""
        node = self._host.cells[self._id].node
        return {child: SyncDriver._view(self._host, child) for child in node.children}

    def tree(self) -> TreeNode:
        """The hierarchy under this agent, with each agent's status (see `AgentRef.tree`)."""
        return self._host.tree_of(self._id)

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` with each event this agent appends; returns the unsubscriber."""
        return self._host.subscribe(self._id, callback)

    def run(self, prompt: ContentInput) -> RunResult[Any]:
        """Run on ``prompt`` to completion (or suspension); raise the run's error if it fails."""
        content = coerce_content(prompt, "a prompt")
        return self._drive(lambda reply: StartRun(content, "", reply))

    def resume(self, answers: Mapping[str, Answer]) -> RunResult[Any]:
        """Answer open requests and drive the run on."""
        return self._drive(lambda reply: ResumeRun(dict(answers), reply))

    def send(self, message: ContentInput) -> None:
        """Steer (see `AgentRef.send`)."""
        self._host.tell(self._id, Steer(user_message(coerce_content(message, "send()'s message"))))
        self._host.pump()

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run in progress."""
        self._host.tell(self._id, CancelRun(reason))
        self._host.pump()

    def _drive(self, first: Any) -> RunResult[Any]:
        future: concurrent.futures.Future[RunResult[Any]] = concurrent.futures.Future()
        self._host.tell(self._id, first(HostReply(future)))
        self._host.pump(until=future.done)
        if not future.done():
            raise RunFailedError(f"agent {self._id!r}: the run neither finished nor suspended")
        return future.result()
