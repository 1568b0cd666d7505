"""`RemoteChild`: on its parent's host, the stand-in of a child that runs on another host.

The `LocalHost` sends the stand-in messages as it would send a local child's actor; the
stand-in puts each in its host's `Lane` to the child's host, so they reach the child in the
order they were sent (a run, then a cancel). A run (or a resumed run) of the child is taken
at once; its `ChildEnd` closes an outbox of the child's host that the stand-in pulls (see
`HostPeers.ended`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import uuid
from typing import TYPE_CHECKING, Any

import pykka

from actors._logging import get_logger
from actors.context._usage import Usage
from actors.exceptions import AgentStoppedError
from actors.host import AgentNode, DelegateReply, ExpireRun, ParentReply, settle
from actors.loop._types import ResumeRun, StartRun
from actors.ray._inputs import Adopt, ChildInput, ExpireInput, TellInput
from actors.ray._outbox import OutboxReader
from actors.ray._wire import ChildEnd, Missing, Outcome, WireReply

if TYPE_CHECKING:
    from actors.ray._peers import HostPeers

__all__ = ["EXPIRE_GRACE", "RemoteChild"]

_log = get_logger("actors.ray")

EXPIRE_GRACE = 10.0
"""Seconds a child's host has, after the child's deadline, to report the child's end."""


class _StopFuture:
    """What ``RemoteChild.stop(block=False)`` returns: ``get`` waits, like pykka's future."""

    def __init__(self, future: concurrent.futures.Future[Any] | None) -> None:
        self._future = future

    def get(self, timeout: float | None = None) -> None:
        if self._future is not None:
            with contextlib.suppress(Exception):
                self._future.result(timeout)


class RemoteChild:
    """Takes the place of a child's actor on its parent's host; the child runs on ``host``.

    Args:
        peers: The parent host's peers.
        host: The index of the child's host.
        node: The parent host's record of the child.
        adopt: What the child's host needs to start it (sent with its first run).
    """

    def __init__(self, peers: HostPeers, host: int, node: AgentNode, adopt: Adopt) -> None:
        self.peers = peers
        self.host = host
        self.node = node
        self._adopt: Adopt | None = adopt
        self._alive = True
        self.remote_alive = True  # whether the child's host still holds it
        self._tokens: dict[int, str] = {}  # id(reply here) -> token of the waiting call
        self._lock = threading.Lock()

    # -- what the host calls, as on a pykka ActorRef --------------------------------------------

    def is_alive(self) -> bool:
        """Whether the child still counts as live here."""
        return self._alive

    def tell(self, message: Any) -> None:
        """Send a message to the child on its host."""
        if not self._alive:
            raise pykka.ActorDeadError(f"{self.node.agent_id} is stopped")
        if isinstance(message, StartRun | ResumeRun) and message.reply is not None:
            self._start(message)
        elif isinstance(message, ExpireRun):
            with self._lock:
                token = self._tokens.get(id(message.reply))
            if token is not None:
                expire = ExpireInput(self.node.agent_id, token, message.timeout)
                self.peers.lane(self.host).put(_Notice(expire))
                # Every wait has a bound: a host that does not answer (alive, but stuck) does
                # not keep the parent waiting past the deadline and a grace.
                self.peers.server.local.effects.call_later(
                    EXPIRE_GRACE,
                    lambda: self.peers.abandon(token, self.node.agent_id, message.timeout),
                )
        else:
            self.peers.lane(self.host).put(_Notice(TellInput(self.node.agent_id, None, message)))

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Ask the child's host a question about it (blocking; never from an agent's turn)."""
        import ray

        from actors.host import Query

        what = message.what if isinstance(message, Query) else str(message)
        ref = self.peers.call(self.host, "query_now", self.node.agent_id, what)
        return ray.get(ref, timeout=timeout).get()

    def stop(self, block: bool = True, timeout: float | None = None) -> Any:
        """Stop the child (on its host, if it still holds it) and forget it here."""
        with self._lock:
            if not self._alive:
                return _StopFuture(None) if not block else None
            self._alive = False
            # A host shutting down leaves the child to its own host's shutdown: stopping it
            # from here would record it stopped, not as it stands (suspended, kept).
            server = self.peers.server
            remote = self.remote_alive and not (server.closing or server.local.closing)
            self.remote_alive = False
        future: concurrent.futures.Future[Any] | None = None
        if remote:
            future = concurrent.futures.Future()
            # After what was sent to it before (a cancel): a stop is no message of the lane.
            self.peers.lane(self.host).drained().add_done_callback(
                lambda _drained: self._stop_remote(future)
            )
        self.peers.server.local.agent_stopped(self.node)
        if block:
            _StopFuture(future).get(timeout)
            return None
        return _StopFuture(future)

    def _stop_remote(self, future: concurrent.futures.Future[Any]) -> None:
        try:
            ref = self.peers.call(self.host, "stop", self.node.agent_id)
        except Exception as exc:
            settle(future, error=exc)
            return

        def stopped(done: concurrent.futures.Future[Any]) -> None:
            error = done.exception()
            settle(future, error=error) if error is not None else settle(future)

        ref.future().add_done_callback(stopped)

    # -- runs ---------------------------------------------------------------------------------

    def _start(self, message: StartRun | ResumeRun) -> None:
        reply = message.reply
        node = self.node
        token = uuid.uuid4().hex
        if isinstance(reply, DelegateReply):
            wire = WireReply(token, "delegate", reply.parent_id, reply.child_id)
        else:
            assert isinstance(reply, ParentReply)
            wire = WireReply(
                token, "parent", reply.parent_id, reply.child_id, reply.run_id, reply.call_id
            )
        bare = (
            StartRun(message.prompt, message.run_id)
            if isinstance(message, StartRun)
            else ResumeRun(message.answers)
        )
        with self._lock:
            self._tokens[id(reply)] = token
            adopt, self._adopt = self._adopt, None
        self.peers.waiting[token] = (self, reply)
        child = ChildInput(adopt, node.agent_id, bare, wire, node.keep, node.wants_deltas())
        self.peers.lane(self.host).put(_ChildRun(self.peers, self.host, child))

    def forget_token(self, reply: Any) -> None:
        """The call for ``reply`` ended."""
        with self._lock:
            self._tokens.pop(id(reply), None)


class _Notice:
    """A message of the lane nobody waits on (a cancel, a steer, a deadline)."""

    def __init__(self, message: TellInput | ExpireInput) -> None:
        self.message = message

    def sent(self) -> None:
        """Nothing to read."""

    def replied(self, reply: Any) -> bool:
        """Taken, or its child is gone already: either way, done."""
        return False

    def lost(self, error: BaseException) -> bool:
        """Its host died: the child's run ends with `HostLostError` through its own pull."""
        _log.debug("a message to a child on another host was lost", error=str(error))
        return False


class _ChildRun:
    """A child's run in the lane; its `ChildEnd` is read from the outbox ``wire.token``.

    Two answers make the verdict: the lane's (taken, or the call failed) and the pull's (the
    end, or the pull failed). A pull that failed before the host took the run waits for the
    lane's answer: the call failed too (the host died), or the host took it and died after.
    """

    def __init__(self, peers: HostPeers, host: int, message: ChildInput) -> None:
        self.peers = peers
        self.host = host
        self.message = message
        self.token = message.wire.token
        self._lock = threading.Lock()
        self._reader: OutboxReader | None = None
        self._taken = False
        self._read_error: BaseException | None = None

    def sent(self) -> None:
        """Start pulling the child's end (again, if the pull failed before the call went again)."""
        with self._lock:
            if self._reader is not None and self._read_error is None:
                return
            self._read_error = None
            reader = self._reader = OutboxReader(
                lambda: self.peers.call(self.host, "pull", self.token),
                self._closed,
                self._read_failed,
            )
        reader.start()

    def _closed(self, end: Any) -> None:
        if isinstance(end, Outcome):  # the host could not take it
            end = ChildEnd(None, end.error, Usage())
        elif isinstance(end, Missing):
            error = AgentStoppedError(f"agent {end.agent_id!r} is not running")
            end = ChildEnd(None, error, Usage())
        self.peers.ended(self.token, end=end)

    def _read_failed(self, error: BaseException) -> None:
        self.peers.lane(self.host).host_failed()
        with self._lock:
            if not self._taken:
                self._read_error = error
                return
        self.peers.ended(self.token, error=error)

    def replied(self, reply: Any) -> bool:
        """Taken: its end comes through the pull."""
        with self._lock:
            self._taken = True
            error = self._read_error
        if error is not None:
            self.peers.ended(self.token, error=error)
        return False

    def lost(self, error: BaseException) -> bool:
        """The call failed: the child's host died (or it could not be sent)."""
        reader = self._reader
        if reader is not None:
            reader.cancel()
        self.peers.ended(self.token, error=error)
        return False
