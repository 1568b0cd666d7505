"""The driver's entries of a `Lane`: a run, a message, a question, each with its answers.

A run is taken by its host at once (the lane's call returns); its end comes from the host's
outbox of its key, read by an `OutboxReader` that starts when the lane's call is sent. Two
answers make a verdict: the lane's (`Taken`, `Missing`, an error, or the call failed) and the
reader's (the outcome, or the pull failed). A question's answer usually comes back with the
lane's call; only one its agent was slow to answer is read from the outbox.

An entry whose host does not hold its agent any more asks to go again once, after the client
has activated the agent from its store (`RayClient.retry`); an entry whose host died under it
ends with `HostLostError`, except a question, which is asked again.
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from typing import Any, Literal, Protocol

from actors._logging import get_logger
from actors.exceptions import AgentStoppedError, HostLostError
from actors.host import TreeStream, settle
from actors.ray._inputs import AskInput, RunInput, TellInput
from actors.ray._lane import Lane, host_gone
from actors.ray._outbox import OutboxReader
from actors.ray._wire import Missing, Outcome, Taken

__all__ = ["AskEntry", "DriverEntry", "Hosts", "RunEntry", "TellEntry", "host_lost"]

_log = get_logger("actors.ray")


class Hosts(Protocol):
    """What an entry reads of the driver's client (`RayClient`): each host's handle and lane."""

    handles: list[Any]
    lanes: list[Lane]


def host_lost(agent_id: str, cause: BaseException | None) -> HostLostError:
    """The error of a run whose host died under it."""
    error = HostLostError(
        f"the host of agent {agent_id!r} died during the run; what the run had in flight "
        "has an unknown outcome. Its log keeps what it did; the next call activates the "
        "agent from its store",
        agent_id=agent_id,
    )
    error.__cause__ = cause
    return error


def _stopped(agent_id: str) -> AgentStoppedError:
    return AgentStoppedError(f"agent {agent_id!r} is not running")


class DriverEntry:
    """What the driver's entries share: their agent, its host, whether they went again.

    Args:
        client: The driver's client.
        agent_id: The agent.
        host: Its host's index.
        incarnation: The life of the agent the ref was made for, or None.
        retried: Whether this is the entry's second sending (after an activation).
    """

    def __init__(
        self,
        client: Hosts,
        agent_id: str,
        host: int,
        incarnation: str | None,
        retried: bool,
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.host = host
        self.incarnation = incarnation
        self.retried = retried
        self.missing = False  # the host's last answer: it does not hold the agent
        self._lock = threading.Lock()

    def sent(self) -> None:
        """Nothing to read (entries with an end override it)."""

    def again(self) -> DriverEntry:
        """The same input, to send once more."""
        raise NotImplementedError

    def give_up(self, error: BaseException) -> None:
        """It cannot go again (``error``: why the agent could not be activated)."""
        raise NotImplementedError

    def _missing(self) -> bool:
        """The host does not hold the agent: go again once (after activating it)."""
        self.missing = True
        if self.retried:
            self.give_up(_stopped(self.agent_id))
            return False
        return True


class _Awaited(DriverEntry):
    """An entry whose end its caller waits on ``future``, read from the outbox ``key``."""

    read_on_send = True  # start reading when the call is sent (else when the host took it)

    def __init__(
        self,
        client: Hosts,
        agent_id: str,
        host: int,
        incarnation: str | None,
        retried: bool,
        future: concurrent.futures.Future[Any],
        stream: TreeStream | None = None,
    ) -> None:
        super().__init__(client, agent_id, host, incarnation, retried)
        self.future = future
        self.stream = stream
        self.key = uuid.uuid4().hex
        self._reader: OutboxReader | None = None
        self._taken = False  # the host took it
        self._read_error: BaseException | None = None  # its pull failed before that

    def sent(self) -> None:
        """Start reading the outbox (again, if a pull failed before the call went again)."""
        if self.read_on_send:
            self._read()

    def _read(self) -> None:
        handle = self.client.handles[self.host]
        with self._lock:
            if self._reader is not None and self._read_error is None:
                return
            self._read_error = None
            reader = self._reader = OutboxReader(
                lambda: handle.pull.remote(self.key),
                self._closed,
                self._read_failed,
                put=self.stream.put if self.stream is not None else None,
            )
        reader.start()

    def _closed(self, outcome: Any) -> None:
        if isinstance(outcome, Outcome):
            _settle(self.future, outcome)
        elif outcome is None:  # the host closed it as it shut down: no end will come
            error = _stopped(self.agent_id)
            with self._lock:
                if not self._taken:
                    self._read_error = error  # the lane's answer decides
                    return
            settle(self.future, error=error)
        # Missing: the lane's answer says so too, and decides.

    def _read_failed(self, error: BaseException) -> None:
        self.client.lanes[self.host].host_failed()
        with self._lock:
            if not self._taken:
                self._read_error = error  # the lane's answer decides
                return
        self._host_died(error)

    def _host_died(self, error: BaseException) -> None:
        settle(self.future, error=host_lost(self.agent_id, error))

    def replied(self, reply: Any) -> bool:
        """Taken: its end comes from the outbox; answered or refused: its caller has it."""
        if isinstance(reply, Missing):
            return self._missing()
        if isinstance(reply, Outcome):
            _settle(self.future, reply)
            return False
        assert isinstance(reply, Taken), reply
        with self._lock:
            self._taken = True
            error = self._read_error
        if isinstance(error, AgentStoppedError):  # its host closed the outbox, shutting down
            settle(self.future, error=error)
        elif error is not None:
            self._host_died(error)
        elif not self.read_on_send:
            self._read()
        return False

    def lost(self, error: BaseException) -> bool:
        """The call failed: the host died under it (or it could not be sent)."""
        reader = self._reader
        if reader is not None:
            reader.cancel()
        if host_gone(error):
            self._host_died(error)
        else:
            settle(self.future, error=error)
        return False

    def give_up(self, error: BaseException) -> None:
        """Its caller gets ``error``."""
        settle(self.future, error=error)


class RunEntry(_Awaited):
    """A run (``kind="run"``) or a resumed run; ``future`` gets its `RunResult`."""

    def __init__(
        self,
        client: Hosts,
        agent_id: str,
        host: int,
        incarnation: str | None,
        kind: Literal["run", "resume"],
        payload: Any,
        future: concurrent.futures.Future[Any],
        stream: TreeStream | None,
        retried: bool = False,
        run: str | None = None,
    ) -> None:
        super().__init__(client, agent_id, host, incarnation, retried, future, stream)
        self.kind = kind
        self.payload = payload
        # One key for every sending of the run: the host that finds it logged starts no other.
        self.run = run or self.key
        self.message = RunInput(
            agent_id, incarnation, kind, payload, self.key, stream is not None, self.run
        )

    def again(self) -> RunEntry:
        """The run, to start once more (with a new outbox)."""
        return RunEntry(
            self.client,
            self.agent_id,
            self.host,
            self.incarnation,
            self.kind,
            self.payload,
            self.future,
            self.stream,
            retried=True,
            run=self.run,
        )


class AskEntry(_Awaited):
    """A question the agent answers in its own turn; ``future`` gets the answer.

    The answer comes with the lane's call, or from the outbox if the agent was slow. A question
    is only read: one whose host died is asked again, once, of the restarted host.
    """

    read_on_send = False

    def __init__(
        self,
        client: Hosts,
        agent_id: str,
        host: int,
        incarnation: str | None,
        what: str,
        future: concurrent.futures.Future[Any],
        retried: bool = False,
        lost_once: bool = False,
    ) -> None:
        super().__init__(client, agent_id, host, incarnation, retried, future)
        self.what = what
        self.lost_once = lost_once
        self.message = AskInput(agent_id, incarnation, what, self.key)

    def _host_died(self, error: BaseException) -> None:
        if self.lost_once:
            super()._host_died(error)
        else:
            self.client.lanes[self.host].put(self._asked_again())

    def lost(self, error: BaseException) -> bool:
        """The call failed: ask again once, if its host died."""
        if host_gone(error) and not self.lost_once:
            reader = self._reader
            if reader is not None:
                reader.cancel()
            return True
        return super().lost(error)

    def _asked_again(self) -> AskEntry:
        return AskEntry(
            self.client,
            self.agent_id,
            self.host,
            self.incarnation,
            self.what,
            self.future,
            retried=self.retried,
            lost_once=True,
        )

    def again(self) -> AskEntry:
        """The question, to ask once more (with a new outbox)."""
        if not self.missing:
            return self._asked_again()
        return AskEntry(
            self.client,
            self.agent_id,
            self.host,
            self.incarnation,
            self.what,
            self.future,
            retried=True,
            lost_once=self.lost_once,
        )


class TellEntry(DriverEntry):
    """A message nobody waits on (a steer, a cancel).

    One that cannot reach its agent is dropped, with a warning.
    """

    def __init__(
        self,
        client: Hosts,
        agent_id: str,
        host: int,
        incarnation: str | None,
        payload: Any,
        retried: bool = False,
    ) -> None:
        super().__init__(client, agent_id, host, incarnation, retried)
        self.payload = payload
        self.message = TellInput(agent_id, incarnation, payload)

    def replied(self, reply: Any) -> bool:
        """Taken, or its agent is not on the host (go again, once, after activating it)."""
        if isinstance(reply, Missing):
            return self._missing()
        if isinstance(reply, Outcome) and reply.error is not None:
            self._dropped(reply.error)
        return False

    def lost(self, error: BaseException) -> bool:
        """The call failed: whether the message was applied is unknown; not sent twice."""
        self._dropped(error)
        return False

    def again(self) -> TellEntry:
        """The message, to send once more."""
        return TellEntry(
            self.client, self.agent_id, self.host, self.incarnation, self.payload, retried=True
        )

    def give_up(self, error: BaseException) -> None:
        """Dropped: its agent cannot be reached."""
        self._dropped(error)

    def _dropped(self, error: BaseException) -> None:
        _log.warning(
            "a message to an agent was dropped",
            agent_id=self.agent_id,
            message=type(self.payload).__name__,
            error=f"{type(error).__name__}: {error}",
        )


def _settle(future: concurrent.futures.Future[Any], outcome: Outcome) -> None:
    if outcome.error is not None:
        settle(future, error=outcome.error)
    else:
        settle(future, result=outcome.value)
