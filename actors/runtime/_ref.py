"""`AgentRef`: the host's handle on a live agent actor."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, cast

import pykka
from typing_extensions import TypeVar

from actors.context._agent_context import AgentContext
from actors.context._events import Event
from actors.context._messages import Message, UserMessage
from actors.context._result import RunResult
from actors.context._suspension import Answer
from actors.context._usage import Usage
from actors.exceptions import AgentStoppedError, RunError, RunTimeoutError, UserError
from actors.loop._types import CancelRun, ResumeRun, StartRun, Steer
from actors.models._model import StreamDelta
from actors.runtime._actor import HostReply, Query

if TYPE_CHECKING:
    from actors.runtime._node import AgentNode
    from actors.runtime._runtime import Runtime

__all__ = ["AgentRef", "RunFuture", "TreeNode"]

OutputT = TypeVar("OutputT", default=Any)

CANCEL_GRACE = 5.0


class RunFuture(Generic[OutputT]):
    """The pending result of ``ref.run_async``: wait on it, or ``await`` it from asyncio.

    Awaiting bridges through the running event loop (never blocks it).
    """

    def __init__(self, future: concurrent.futures.Future[RunResult[OutputT]]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> RunResult[OutputT]:
        """Block until the run ends; raise its `RunError` if it failed.

        Raises:
            TimeoutError: the run did not end within ``timeout`` seconds (it goes on).
        """
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the run did not end within {timeout} s") from None

    def done(self) -> bool:
        """Whether the run has ended."""
        return self._future.done()

    def add_done_callback(self, callback: Callable[[RunFuture[OutputT]], None]) -> None:
        """Call ``callback(self)`` when the run ends (from the agent's thread)."""
        self._future.add_done_callback(lambda _f: callback(self))

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return asyncio.wrap_future(self._future).__await__()


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One agent of a live tree, as ``ref.tree()`` reports it.

    Attributes:
        agent_id: The agent's id.
        name: Its spec's name.
        parent_id: Its parent's id, or None at the root.
        status: ``idle``, ``running``, ``suspended``, ``finished``, ``failed``, ``cancelled``
            or ``stopped``.
        step: The model request the current run is at.
        tool: The tool (or subagent) in progress, or None.
        children: The children, in spawn order.
    """

    agent_id: str
    name: str
    parent_id: str | None
    status: str
    step: int
    tool: str | None
    children: tuple[TreeNode, ...]

    def walk(self) -> list[TreeNode]:
        """This node and every descendant, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


class AgentRef(Generic[OutputT]):
    """A handle on a live agent actor. All methods are thread-safe.

    Get one from `Runtime.spawn`. Runs block (`run`) or return a `RunFuture` (`run_async`); a
    second run continues the same conversation.
    """

    def __init__(self, runtime: Runtime, node: AgentNode) -> None:
        self._runtime = runtime
        self._node = node

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self._node.agent_id

    @property
    def name(self) -> str:
        """The agent's spec name."""
        return self._node.name

    @property
    def parent_id(self) -> str | None:
        """The parent's id, or None for a root."""
        return self._node.parent_id

    @property
    def session_id(self) -> str | None:
        """The session the agent persists to, or None without a store."""
        return self._node.session_id

    @property
    def status(self) -> str:
        """The agent's status as last reported by its actor."""
        return self._node.status

    def _actor(self) -> pykka.ActorRef[Any]:
        ref = self._node.ref
        if ref is None or not ref.is_alive():
            raise AgentStoppedError(
                f"agent {self.agent_id!r} is not running; spawn it again or restore its session"
            )
        return ref

    def _tell(self, message: Any) -> None:
        try:
            self._actor().tell(message)
        except pykka.ActorDeadError:
            raise AgentStoppedError(f"agent {self.agent_id!r} is not running") from None

    # -- runs -----------------------------------------------------------------------------------

    def run_async(self, prompt: str) -> RunFuture[OutputT]:
        """Start a run on ``prompt``; returns at once with a `RunFuture`."""
        if not isinstance(prompt, str):
            raise UserError(f"a prompt is a str, got {type(prompt).__name__}")
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        self._tell(StartRun(prompt, "", HostReply(future)))
        return RunFuture(future)

    def run(self, prompt: str, *, timeout: float | None = None) -> RunResult[OutputT]:
        """Run on ``prompt`` and block until the run completes, suspends or is cancelled.

        Args:
            prompt: The user's message.
            timeout: Seconds to wait; past them the tree is cancelled and `RunTimeoutError`
                (carrying the partial transcript) is raised.

        Raises:
            RunError: the run failed (a limit, a model failure, ...); the error carries the
                partial transcript and usage.
        """
        return self._wait(self.run_async(prompt), timeout)

    def _wait(self, future: RunFuture[OutputT], timeout: float | None) -> RunResult[OutputT]:
        try:
            return future.result(timeout)
        except TimeoutError:
            self.cancel(f"timed out after {timeout} s")
            messages: tuple[Message, ...]
            usage: Usage | None
            try:
                partial = future.result(CANCEL_GRACE)
            except (TimeoutError, RunError):
                messages, usage = (), None
            else:
                if partial.status == "completed":
                    return partial  # it ended on its own just before the cancel arrived
                # Cancelled; or suspended just before the cancel arrived, which then cancelled
                # the suspended run: its requests can no longer be answered.
                messages, usage = partial.messages, partial.usage
            raise RunTimeoutError(
                f"agent {self.agent_id!r}: the run did not finish within {timeout} s and was "
                "cancelled",
                messages=messages,
                usage=usage,
                agent_id=self.agent_id,
            ) from None

    def resume(
        self, answers: Mapping[str, Answer], *, timeout: float | None = None
    ) -> RunResult[OutputT]:
        """Answer open requests (at any depth) and block until the run ends or suspends again.

        Raises:
            UnknownRequestError: an id is unknown or already answered; nothing was changed.
        """
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        self._tell(ResumeRun(dict(answers), HostReply(future)))
        return self._wait(RunFuture(future), timeout)

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run in progress and every descendant's; an idle agent is unaffected."""
        self._tell(CancelRun(reason))

    def send(self, message: str | UserMessage) -> None:
        """Steer: queue a user message for the next step boundary of the run in progress.

        It is logged at once (a ``steered`` event), so a crash cannot lose it. Sent to an idle
        agent, or after the run's last step boundary, the message joins the transcript (after
        the run) and starts nothing: the next run's model sees it before that run's prompt.
        """
        if isinstance(message, str):
            message = UserMessage(content=message)
        if not isinstance(message, UserMessage):
            raise UserError(f"send() takes a str or UserMessage, got {type(message).__name__}")
        self._tell(Steer(message))

    # -- views ----------------------------------------------------------------------------------

    def context(self, timeout: float = 10.0) -> AgentContext:
        """A snapshot of the agent's context (a copy: changing it changes nothing)."""
        try:
            blob = self._actor().ask(Query("context"), timeout=timeout)
        except pykka.ActorDeadError:
            raise AgentStoppedError(f"agent {self.agent_id!r} is not running") from None
        return AgentContext.deserialize(cast(dict[str, Any], blob))

    def subscribe(self, callback: Callable[[Event | StreamDelta], None]) -> Callable[[], None]:
        """Call ``callback`` with each event as it is appended, and each streamed delta.

        Callbacks run on the agent's thread: keep them quick. Returns an unsubscribe function.
        """
        self._node.listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._node.listeners:
                self._node.listeners.remove(callback)

        return unsubscribe

    def tree(self) -> TreeNode:
        """The live hierarchy under this agent."""
        return self._runtime.tree_of(self.agent_id)

    def stop(self) -> None:
        """Stop the agent and all its descendants (a run in progress fails)."""
        self._runtime.stop_agent(self.agent_id)

    def __repr__(self) -> str:
        return f"<AgentRef {self.agent_id!r} {self.status}>"
