"""`AgentRef`: the host's handle on a live agent actor."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, cast

from typing_extensions import TypeVar

from actors._checks import check_timeout
from actors.context._agent_context import AgentContext
from actors.context._events import Event
from actors.context._messages import Message, UserMessage, user_message
from actors.context._parts import ContentInput, coerce_content
from actors.context._result import RunResult
from actors.context._suspension import Answer
from actors.context._usage import Usage
from actors.exceptions import ActorsError, RunError, RunTimeoutError, UserError
from actors.host._messages import HostReply, OpenStream, Query
from actors.host._stream import RunEnded, StreamEvent, TreeStream
from actors.host._tombstone import TreeNode
from actors.loop._types import CancelRun, ResumeRun, StartRun, Steer

if TYPE_CHECKING:
    from actors.host._node import AgentNode, Tree

__all__ = ["AgentRef", "RunFuture", "TreeNode"]

OutputT = TypeVar("OutputT", default=Any)

CANCEL_GRACE = 5.0


class _Passivates(Protocol):
    def passivate(self, agent_id: str, timeout: float) -> bool: ...


class RefHost(Protocol):
    """What an `AgentRef` asks of the host it addresses (`LocalHost`, or Ray's driver side)."""

    @property
    def virtual(self) -> _Passivates: ...
    def send(self, agent_id: str, message: Any, incarnation: str | None = None) -> None: ...
    def ask(
        self, agent_id: str, message: Any, timeout: float, incarnation: str | None = None
    ) -> Any: ...
    def status_of(self, agent_id: str, tree: Tree | None = None) -> str: ...
    def subscribe(self, agent_id: str, callback: Callable[[Event], None]) -> Callable[[], None]: ...
    def tree_of(self, agent_id: str, tree: Tree | None = None) -> TreeNode: ...
    def stop_agent(self, agent_id: str) -> None: ...


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


class AgentRef(Generic[OutputT]):
    """A handle on an agent, addressed by id. All methods are thread-safe.

    Get one from `Runtime.spawn`, `Runtime.open_session`, `Runtime.restore` or `Runtime.ref`.
    Runs block (`run`) or return a `RunFuture` (`run_async`); a second run continues the same
    conversation. The handle stays valid while its agent is passivated: the next message wakes
    it from its store.
    """

    _host: RefHost
    _id: str
    _name: str
    _parent_id: str | None
    _session_id: str | None
    _tree: Tree | None
    _incarnation: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UserError(
            "an AgentRef is not built by hand: get one from spawn(), open_session(), restore() "
            "or ref() of a Runtime, Simulation or RayRuntime"
        )

    @classmethod
    def _new(
        cls,
        host: RefHost,
        agent_id: str,
        *,
        name: str,
        parent_id: str | None = None,
        session_id: str | None = None,
        tree: Tree | None = None,
    ) -> Self:
        """A handle on ``agent_id`` of ``host`` (the hosts' constructor; users get refs)."""
        ref = cls.__new__(cls)
        ref._host = host
        ref._id = agent_id
        ref._name = name
        ref._parent_id = parent_id
        ref._session_id = session_id
        # The tree the agent belonged to when this ref was made: how it ended, and which life
        # of an id this ref addresses (an id may be given again after its agent stopped).
        ref._tree = tree
        ref._incarnation = tree.incarnation if tree is not None else session_id
        return ref

    @classmethod
    def of(cls, host: RefHost, node: AgentNode) -> AgentRef[Any]:
        """The handle of a host's agent."""
        return cls._new(
            host,
            node.agent_id,
            name=node.name,
            parent_id=node.parent_id,
            session_id=node.session_id,
            tree=node.tree,
        )

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self._id

    @property
    def name(self) -> str:
        """The agent's spec name."""
        return self._name

    @property
    def parent_id(self) -> str | None:
        """The parent's id, or None for a root."""
        return self._parent_id

    @property
    def session_id(self) -> str | None:
        """The session the agent persists to, or None without a store."""
        return self._session_id

    @property
    def status(self) -> str:
        """The agent's status.

        ``idle``, ``running``, ``suspended`` (also while passivated), ``finished``, ``failed``,
        ``cancelled`` or ``stopped``.
        """
        return self._host.status_of(self._id, self._tree)

    def _tell(self, message: Any) -> None:
        self._host.send(self._id, message, self._incarnation)

    # -- runs -----------------------------------------------------------------------------------

    def run_async(self, prompt: ContentInput) -> RunFuture[OutputT]:
        """Start a run on ``prompt``; returns at once with a `RunFuture`."""
        content = coerce_content(prompt, "a prompt")
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        self._tell(StartRun(content, "", HostReply(future)))
        return RunFuture(future)

    def run(self, prompt: ContentInput, *, timeout: float | None = None) -> RunResult[OutputT]:
        """Run on ``prompt`` and block until the run completes, suspends or is cancelled.

        Args:
            prompt: The user's message: a str, or a sequence of parts (text and images, audio,
                documents: `ImagePart`, `file_part`, ...).
            timeout: Seconds to wait; past them the tree is cancelled and `RunTimeoutError`
                (carrying the partial transcript) is raised.

        Raises:
            RunError: the run failed (a limit, a model failure, ...); the error carries the
                partial transcript and usage.
        """
        check_timeout(timeout, "run(timeout=...)")
        return self._wait(self.run_async(prompt), timeout)

    def run_stream(self, prompt: ContentInput) -> Iterator[StreamEvent]:
        """Run on ``prompt`` and yield what happens in the whole tree as it happens.

        Text as the models stream it, tool calls starting and finishing, subagents spawned and
        finished, suspensions, each with the agent's id and path from this agent; the last
        event is a `RunEnded` with the result (or the error). Only a streamed run asks its
        models to stream. Iterate it to the end (or cancel the run): the events of a run left
        unread are kept for the reader.
        """
        stream = self._start_stream(prompt, TreeStream())
        return iter(stream)

    def arun_stream(self, prompt: ContentInput) -> AsyncIterator[StreamEvent]:
        """`run_stream` for asyncio: an async iterator that never blocks the running loop.

        Call it from a coroutine (``async for event in ref.arun_stream(prompt)``).
        """
        stream = self._start_stream(prompt, TreeStream(asyncio.get_running_loop()))
        return stream.aiter()

    def aresume_stream(self, answers: Mapping[str, Answer]) -> AsyncIterator[StreamEvent]:
        """`resume` streamed for asyncio: the continued run's events, as `arun_stream` gives.

        Call it from a coroutine. A request id that is unknown or answered already ends the
        stream with a `RunEnded` whose error is an `UnknownRequestError`.
        """
        answers = self._check_answers(answers)
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        stream = TreeStream(asyncio.get_running_loop())
        self._open_stream(stream, future, ResumeRun(answers, HostReply(future)))
        return stream.aiter()

    def _start_stream(self, prompt: ContentInput, stream: TreeStream) -> TreeStream:
        content = coerce_content(prompt, "a prompt")
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        return self._open_stream(stream, future, StartRun(content, "", HostReply(future)))

    def _open_stream(
        self,
        stream: TreeStream,
        future: concurrent.futures.Future[RunResult[OutputT]],
        start: StartRun | ResumeRun,
    ) -> TreeStream:
        closer: list[Callable[[], None]] = []
        path = (self._id,)

        def ended(done: concurrent.futures.Future[RunResult[OutputT]]) -> None:
            for close in closer:
                close()
            error = done.exception()
            stream.end(
                RunEnded(
                    agent_id=self._id,
                    path=path,
                    result=None if error is not None else done.result(),
                    error=error if isinstance(error, ActorsError) else None,
                )
            )

        future.add_done_callback(ended)
        # One mailbox, in order: the stream opens in the agent's turn (after it is woken, if
        # it was passivated), then the run starts.
        self._tell(OpenStream(stream, closer))
        self._tell(start)
        return stream

    def _wait(self, future: RunFuture[OutputT], timeout: float | None) -> RunResult[OutputT]:
        try:
            return future.result(timeout)
        except TimeoutError:
            self.cancel(f"timed out after {timeout} s")
            messages: Sequence[Message]
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
        check_timeout(timeout, "resume(timeout=...)")
        return self._wait(self.resume_async(answers), timeout)

    def resume_async(self, answers: Mapping[str, Answer]) -> RunFuture[OutputT]:
        """`resume` without blocking: returns at once with a `RunFuture` (awaitable)."""
        answers = self._check_answers(answers)
        future: concurrent.futures.Future[RunResult[OutputT]] = concurrent.futures.Future()
        self._tell(ResumeRun(answers, HostReply(future)))
        return RunFuture(future)

    @staticmethod
    def _check_answers(answers: Mapping[str, Answer]) -> dict[str, Answer]:
        if not isinstance(answers, Mapping):
            raise UserError(
                "resume takes a mapping of request id to Answer (see result.pending), "
                f"got {type(answers).__name__}"
            )
        return dict(answers)

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the run in progress and every descendant's; an idle agent is unaffected."""
        self._tell(CancelRun(reason))

    def send(self, message: ContentInput | UserMessage) -> None:
        """Steer: queue a user message for the next step boundary of the run in progress.

        It is logged at once (a ``steered`` event), so a crash cannot lose it. Sent to an idle
        agent, or after the run's last step boundary, the message joins the transcript (after
        the run) and starts nothing: the next run's model sees it before that run's prompt.
        """
        if not isinstance(message, UserMessage):
            message = user_message(coerce_content(message, "send()'s message"))
        self._tell(Steer(message))

    # -- views ----------------------------------------------------------------------------------

    def context(self, timeout: float = 10.0) -> AgentContext:
        """A snapshot of the agent's context (a copy: changing it changes nothing)."""
        blob = self._host.ask(self._id, Query("context"), timeout, self._incarnation)
        return AgentContext.deserialize(cast(dict[str, Any], blob))

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` with each event of this agent's log as it is appended.

        Callbacks run on the agent's turn (a worker thread): keep them quick. They stay
        subscribed while the agent is passivated. Returns an unsubscribe function. For a whole
        tree's events with the models' streamed text, use `run_stream`.
        """
        return self._host.subscribe(self._id, callback)

    def tree(self) -> TreeNode:
        """The hierarchy under this agent: live agents, and children that ended."""
        return self._host.tree_of(self._id, self._tree)

    def passivate(self, timeout: float = 10.0) -> bool:
        """Put this agent's tree to sleep in its store now, if it is idle; whether it was.

        The runtime does it by itself after ``Runtime(idle_after=...)``; the next message to
        any agent of the tree wakes it.
        """
        return self._host.virtual.passivate(self._id, timeout)

    def stop(self) -> None:
        """Stop the agent and all its descendants (a run in progress fails)."""
        self._host.stop_agent(self._id)

    def __repr__(self) -> str:
        return f"<AgentRef {self.agent_id!r} {self.status}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentRef) and other._host is self._host and other._id == self._id

    def __hash__(self) -> int:
        return hash(self._id)
