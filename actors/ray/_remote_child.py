"""`RemoteChild`: on its parent's host, the stand-in of a child that runs on another host.

The `LocalHost` sends the stand-in messages as it would send a local child's actor; the
stand-in turns each into a Ray call to the child's host. A run (or a resumed run) of the child
is one call that returns when the run ends (see `HostPeers.ended`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pykka

from actors.loop._agent import Agent
from actors.loop._types import ResumeRun, StartRun
from actors.ray._wire import TreeSeed, WireReply
from actors.runtime._host import DelegateReply, ExpireRun, ParentReply
from actors.runtime._node import AgentNode

if TYPE_CHECKING:
    from actors.ray._peers import HostPeers

__all__ = ["EXPIRE_GRACE", "Adopt", "RemoteChild"]

EXPIRE_GRACE = 10.0
"""Seconds a child's host has, after the child's deadline, to report the child's end."""


@dataclass(frozen=True, slots=True)
class Adopt:
    """A new child, as it travels to the host that will run it.

    Attributes:
        seed: What its tree shares (store, session, tool_context, approval handler).
        parent_host: The index of its parent's host.
        spec: Its spec.
        context: Its context as its parent's host made it (first events already stored).
        path: The agent ids from the root down to it.
        depth: Its depth in the tree.
        position: Its spawn position in the session.
    """

    seed: TreeSeed
    parent_host: int
    spec: Agent[Any]
    context: dict[str, Any] = field(repr=False)
    path: tuple[str, ...]
    depth: int
    position: int


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
                self.peers.call(
                    self.host, "child_expire", self.node.agent_id, token, message.timeout
                )
                # Every wait has a bound: a host that does not answer (alive, but stuck) does
                # not keep the parent waiting past the deadline and a grace.
                self.peers.server.local.effects.call_later(
                    EXPIRE_GRACE,
                    lambda: self.peers.abandon(token, self.node.agent_id, message.timeout),
                )
        else:
            self.peers.call(self.host, "tell", self.node.agent_id, None, message)

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Ask the child's host a question about it (blocking; never from an agent's turn)."""
        import ray

        from actors.runtime._host import Query

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
            remote = self.remote_alive and not self.peers.server.local.closing
            self.remote_alive = False
        future: concurrent.futures.Future[Any] | None = None
        if remote:
            future = self.peers.call(self.host, "stop", self.node.agent_id).future()
        self.peers.server.local.agent_stopped(self.node)
        if block:
            _StopFuture(future).get(timeout)
            return None
        return _StopFuture(future)

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
        ref = self.peers.call(
            self.host,
            "child_input",
            adopt,
            node.agent_id,
            bare,
            wire,
            node.keep,
            node.wants_deltas(),
        )
        ref.future().add_done_callback(lambda done: self.peers.ended(token, done))

    def forget_token(self, reply: Any) -> None:
        """The call for ``reply`` ended."""
        with self._lock:
            self._tokens.pop(id(reply), None)
