"""`SimRef`: an `AgentRef` whose blocking calls drive the simulation instead of waiting."""

from __future__ import annotations

import concurrent.futures
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from typing_extensions import TypeVar

from actors.context._parts import ContentInput, coerce_content
from actors.context._result import RunResult
from actors.context._suspension import Answer
from actors.exceptions import RunError, RunFailedError, RunTimeoutError, UserError
from actors.host import AgentRef, HostReply, RunEnded, RunFuture, StreamEvent, TreeStream
from actors.loop._types import ResumeRun, StartRun
from actors.sim._future import InlineFuture

if TYPE_CHECKING:
    from actors.sim._host import SimHost

__all__ = ["SimRef", "SimRunFuture"]

OutputT = TypeVar("OutputT", default=Any)


class SimRunFuture(RunFuture[OutputT]):
    """A run's pending result in a simulation: ``result()`` runs the simulation until it ends."""

    def __init__(
        self, future: concurrent.futures.Future[RunResult[OutputT]], host: SimHost, agent_id: str
    ) -> None:
        super().__init__(future)
        self._host = host
        self._agent_id = agent_id

    def result(self, timeout: float | None = None) -> RunResult[OutputT]:
        """Run the simulation until this run ends; raise its `RunError` if it failed.

        Args:
            timeout: Virtual seconds to run at most.

        Raises:
            TimeoutError: the run did not end within ``timeout`` virtual seconds (it goes on).
            RunFailedError: nothing left in the simulation can end the run.
            UserError: called from inside the simulation (a world event or a tool).
        """
        future = self._future
        if not future.done():
            _check_outside(self._host, "result()")
            horizon = None if timeout is None else self._host.now + timeout
            self._host.drive(future.done, horizon)
            if not future.done():
                if timeout is not None and self._host.now >= cast(float, horizon):
                    raise TimeoutError(f"the run did not end within {timeout} virtual s")
                raise RunFailedError(
                    f"agent {self._agent_id!r}: the run can never end: nothing is scheduled "
                    "in the simulation that could end it"
                )
        return future.result()


class SimRef(AgentRef[OutputT]):
    """A handle on an agent of a `Simulation`: the `AgentRef` API, on virtual time.

    ``run``, ``resume`` and ``run_stream`` run the simulation (every agent and world event in
    it) until this agent's run ends, so call them from the driving code, not from a world
    event or a tool: there use ``run_async`` and ``resume_async``, whose futures end as the
    simulation goes on. Timeouts are virtual seconds.
    """

    _host: SimHost  # type: ignore[assignment]  # the simulator speaks the ref's host API

    def run_async(self, prompt: ContentInput) -> SimRunFuture[OutputT]:
        """Start a run on ``prompt``; it goes on as the simulation runs."""
        content = coerce_content(prompt, "a prompt")
        future: concurrent.futures.Future[RunResult[OutputT]] = InlineFuture()
        self._tell(StartRun(content, "", HostReply(future)))
        return SimRunFuture(future, self._host, self._id)

    def resume_async(self, answers: Mapping[str, Answer]) -> SimRunFuture[OutputT]:
        """Answer open requests (a world event answering an agent); returns at once."""
        future: concurrent.futures.Future[RunResult[OutputT]] = InlineFuture()
        self._tell(ResumeRun(dict(answers), HostReply(future)))
        return SimRunFuture(future, self._host, self._id)

    def resume(
        self, answers: Mapping[str, Answer], *, timeout: float | None = None
    ) -> RunResult[OutputT]:
        """Answer open requests and run the simulation until the run ends or suspends again.

        Raises:
            UnknownRequestError: an id is unknown or already answered; nothing was changed.
        """
        return self._wait(self.resume_async(answers), timeout)

    def _wait(self, future: RunFuture[OutputT], timeout: float | None) -> RunResult[OutputT]:
        host = self._host
        _check_outside(host, "run() and resume()")
        inner = future._future
        deadline = None if timeout is None else host.now + timeout
        host.drive(inner.done, deadline)
        if inner.done():
            return inner.result()
        if deadline is None or host.now < deadline:
            raise RunFailedError(
                f"agent {self.agent_id!r}: the run can never end: nothing is scheduled in the "
                "simulation that could end it"
            )
        self.cancel(f"timed out after {timeout:g} virtual s")
        host.drive(inner.done, None)
        messages: Sequence[Any] = ()
        usage = None
        if inner.done():
            try:
                partial = inner.result()
            except RunError:
                pass
            else:
                if partial.status == "completed":
                    return partial
                messages, usage = partial.messages, partial.usage
        raise RunTimeoutError(
            f"agent {self.agent_id!r}: the run did not finish within {timeout:g} virtual s and "
            "was cancelled",
            messages=messages,
            usage=usage,
            agent_id=self.agent_id,
        )

    def run_stream(self, prompt: ContentInput) -> Iterator[StreamEvent]:
        """Run on ``prompt`` (running the simulation until it ends) and yield what happened.

        The events are the same a `Runtime`'s stream gives, the last a `RunEnded`.
        """
        _check_outside(self._host, "run_stream()")
        stream = _EndingStream()
        self._start_stream(prompt, stream)
        self._host.drive(lambda: stream.ended, None)
        if not stream.ended:
            stream.end(
                RunEnded(
                    agent_id=self._id,
                    path=(self._id,),
                    result=None,
                    error=RunFailedError(f"agent {self._id!r}: the run can never end"),
                )
            )
        return iter(stream)

    def arun_stream(self, prompt: ContentInput) -> AsyncIterator[StreamEvent]:
        """`run_stream` as an async iterator (the simulation runs before the first event)."""
        events = list(self.run_stream(prompt))

        async def replay() -> AsyncIterator[StreamEvent]:
            for event in events:
                yield event

        return replay()

    def passivate(self, timeout: float = 10.0) -> bool:
        """A simulation keeps its agents in memory: never passivated (False)."""
        return False

    def __repr__(self) -> str:
        return f"<SimRef {self.agent_id!r} {self.status}>"


class _EndingStream(TreeStream):
    def __init__(self) -> None:
        super().__init__()
        self.ended = False

    def end(self, event: RunEnded) -> None:
        self.ended = True
        super().end(event)


def _check_outside(host: SimHost, what: str) -> None:
    if host.driving:
        raise UserError(
            f"{what} runs the simulation until the run ends, which cannot happen from inside "
            "it (a world event or a tool); use run_async() or resume_async() there"
        )
