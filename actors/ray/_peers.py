"""`HostPeers`: placement, and the calls between hosts for children that live elsewhere.

A child placed on another host is, on its parent's host, an `AgentNode` whose actor is a
`RemoteChild` (see `actors.ray._remote_child`): the `LocalHost` sends it messages as it would
to a local child's actor, and the stand-in puts each in this host's `Lane` to the child's
host, which keeps their order. A run (or a resumed run) of the child ends in an outbox of the
child's host, pulled from here, and reaches the parent as the usual message (`ChildFinished`,
`DelegateDone`); if the child's host dies, the pull (or the lane's call) fails, and the parent
gets a `HostLostError` instead. On the child's host, the child's answer to its parent (a
message to an id that host does not hold) settles the waiting run (`HostPeers.send`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from actors._logging import get_logger
from actors.context._usage import Usage
from actors.exceptions import ActorsError, HostLostError, RunTimeoutError
from actors.host import (
    AgentNode,
    DelegateDone,
    DelegateReply,
    ExpireRun,
    OpenStream,
    ParentReply,
    StreamEvent,
    TreeStream,
    settle,
)
from actors.loop._agent import Subagent
from actors.loop._budget import Budget
from actors.loop._loop import AgentLoop
from actors.loop._types import ChildFinished, Finish, ResumeRun, SendMessage, StartRun
from actors.ray._inputs import Adopt
from actors.ray._lane import Lane, host_gone
from actors.ray._mail import PeerMail
from actors.ray._remote_child import RemoteChild
from actors.ray._wire import ChildEnd, WireReply, check_travels, portable_error

if TYPE_CHECKING:
    from actors.ray._server import HostServer

__all__ = ["ForwardStream", "HostPeers"]

_log = get_logger("actors.ray")


class ForwardStream(TreeStream):
    """Sends a remote child's stream events to its parent's host, one batch at a time.

    At most one batch is in flight, so batches arrive in order; the run's end waits for it
    and carries what is left (`ChildEnd.events`), so the parent's stream shows the child's
    events before the parent's own next ones.
    """

    def __init__(self, peers: HostPeers, host: int, parent_id: str) -> None:
        super().__init__()
        self._peers = peers
        self._host = host
        self._parent_id = parent_id
        self._lock = threading.Lock()
        self._events: list[StreamEvent] = []
        self._in_flight: concurrent.futures.Future[Any] | None = None

    def put(self, event: StreamEvent) -> None:
        """Send the event now, or with the next batch if one is in flight."""
        with self._lock:
            self._events.append(event)
            if self._in_flight is not None:
                return
        self._send()

    def _send(self) -> None:
        with self._lock:
            if not self._events or self._in_flight is not None:
                return
            batch, self._events = tuple(self._events), []
            flight = self._peers.call(self._host, "stream_in", self._parent_id, batch).future()
            self._in_flight = flight

        def sent(_done: concurrent.futures.Future[Any]) -> None:
            with self._lock:
                self._in_flight = None
            self._send()

        flight.add_done_callback(sent)

    def then(self, finish: Any) -> None:
        """Call ``finish(events left)`` once no batch is in flight."""
        with self._lock:
            flight = self._in_flight
            if flight is None:
                batch, self._events = tuple(self._events), []
        if flight is None:
            finish(batch)
        else:
            flight.add_done_callback(lambda _done: self.then(finish))


class HostPeers:
    """The `Peers` of one agent host: placement, stand-ins, and the calls between hosts.

    Args:
        server: The host this belongs to.
        names: The Ray actor names of all hosts, by index.
        namespace: Their Ray namespace.
        placement: Where children go whose `Subagent` names no placement (and delegated ones).
    """

    def __init__(
        self, server: HostServer, names: tuple[str, ...], namespace: str, placement: str
    ) -> None:
        self.server = server
        self.names = names
        self.namespace = namespace
        self.placement = placement
        self._handles: dict[int, Any] = {}
        self._next = itertools.count()
        # On a parent's host: calls waiting for a remote child's run, by token.
        self.waiting: dict[str, tuple[RemoteChild, Any]] = {}
        # On a child's host: the runs a parent's host waits for.
        self.runs: dict[str, tuple[Any, concurrent.futures.Future[ChildEnd]]] = {}
        self._by_reply: dict[tuple[str, ...], str] = {}
        self.forwards: dict[str, ForwardStream] = {}  # token -> stream of that run
        self._lanes: dict[int, Lane] = {}
        self._lock = threading.Lock()
        self.mail = PeerMail(server, len(names), self.call)

    # -- calls --------------------------------------------------------------------------------

    def handle(self, index: int) -> Any:
        """The Ray handle of host ``index`` (looked up by name once)."""
        handle = self._handles.get(index)
        if handle is None:
            import ray

            handle = ray.get_actor(self.names[index], namespace=self.namespace)
            self._handles[index] = handle
        return handle

    def call(self, index: int, method: str, *args: Any) -> Any:
        """Call ``method`` of host ``index``; returns the call's ObjectRef at once."""
        return getattr(self.handle(index), method).remote(*args)

    def lane(self, index: int) -> Lane:
        """This host's lane to host ``index``: what its agents send there arrives in order."""
        with self._lock:
            lane = self._lanes.get(index)
            if lane is None:
                lane = self._lanes[index] = Lane(
                    lambda inputs: self.call(index, "deliver", inputs).future()
                )
            return lane

    # -- Peers: placement ---------------------------------------------------------------------

    def place(self, child: AgentNode, loop: AgentLoop, subagent: Subagent | None) -> Any:
        """A `RemoteChild` for a child that the placement puts on another host, else None."""
        placement = (subagent.placement if subagent is not None else None) or self.placement
        if placement != "spread" or len(self.names) < 2 or self.server.closing:
            return None  # with its parent (a host shutting down keeps new children here)
        # Round-robin over the other hosts, starting with the next one.
        others = len(self.names) - 1
        host = (self.server.index + 1 + next(self._next) % others) % len(self.names)
        seed = self.server.seed_of(child.tree)
        if child.tool_context is not self.server.context_of(child.tree):
            # Narrowed by its Subagent: what it got travels as it is, if it can.
            check_travels(
                child.tool_context,
                f"the tool_context of subagent {child.name!r} (narrowed by its Subagent)",
                "narrow to plain values, or place the subagent with its parent",
            )
            seed = dataclasses.replace(seed, tool_context=child.tool_context, narrowed=True)
        adopt = Adopt(
            seed=seed,
            parent_host=self.server.index,
            spec=child.spec,
            context=loop.ctx.serialize(),
            path=child.path,
            depth=child.depth,
            position=child.position,
            budgets=shared_above(child),
        )
        return RemoteChild(self, host, child, adopt)

    # -- Peers: messages to ids this host does not hold -----------------------------------------

    def peer_exists(self, agent_id: str) -> bool:
        """Whether another host holds ``agent_id`` (see `PeerMail.locate`)."""
        return self.mail.exists(agent_id)

    def find(self, agent_ids: Sequence[str], then: Callable[[], None]) -> None:
        """Look up agents of other hosts off any agent's turn, then call ``then``."""
        self.mail.find(agent_ids, then)

    def send_peer(self, sender: str, effect: SendMessage) -> bool:
        """Send a logged peer message to an agent of another host; False: not remote."""
        return self.mail.send(sender, effect)

    def send(self, agent_id: str, message: Any) -> bool:
        """A child of this host answered a parent of another: settle that host's call."""
        if isinstance(message, ChildFinished):
            key: tuple[str, ...] = ("parent", message.child_id, message.run_id, message.call_id)
            end = ChildEnd(message.result, portable_error(message.error), message.tree_usage)
        elif isinstance(message, DelegateDone):
            key = ("delegate", message.reply.child_id)
            end = ChildEnd(message.result, portable_error(message.error), message.tree_usage)
        else:
            return False
        with self._lock:
            token = self._by_reply.pop(key, None)
            entry = self.runs.pop(token, None) if token is not None else None
        if entry is None:
            return False  # nobody waits any more (the parent's host died meanwhile)
        forward = self.forwards.pop(token or "", None)
        if forward is None:
            settle(entry[1], result=end)
        else:
            future = entry[1]
            forward.then(
                lambda left: settle(
                    future, result=ChildEnd(end.result, end.error, end.tree_usage, left)
                )
            )
        return True

    # -- on a child's host ----------------------------------------------------------------------

    def child_input(
        self,
        adopt: Adopt | None,
        child_id: str,
        message: StartRun | ResumeRun,
        wire: WireReply,
        keep: bool,
        stream: bool,
    ) -> concurrent.futures.Future[ChildEnd]:
        """Start (adopting it first, if new) or resume a child's run for a parent elsewhere."""
        local = self.server.local
        if adopt is not None:
            self.server.adopt(child_id, adopt)
        reply: Any
        if wire.kind == "parent":
            reply = ParentReply(wire.parent_id, wire.run_id, wire.call_id, child_id)
            key: tuple[str, ...] = ("parent", child_id, wire.run_id, wire.call_id)
        else:
            reply = DelegateReply(wire.parent_id, child_id, concurrent.futures.Future())
            key = ("delegate", child_id)
        future: concurrent.futures.Future[ChildEnd] = concurrent.futures.Future()
        with self._lock:
            self.runs[wire.token] = (reply, future)
            self._by_reply[key] = wire.token
        with local.lock:
            node = local.nodes.get(child_id)
        if node is not None:
            node.keep = keep
        sent = (
            StartRun(message.prompt, message.run_id, reply)
            if isinstance(message, StartRun)
            else ResumeRun(message.answers, reply)
        )
        if stream and node is not None:
            forward = ForwardStream(self, self._parent_host(wire), wire.parent_id)
            self.forwards[wire.token] = forward
            local.tell(child_id, OpenStream(forward, []))
        try:
            local.send(child_id, sent)
        except Exception as exc:
            with self._lock:
                self.runs.pop(wire.token, None)
                self._by_reply.pop(key, None)
            settle(future, result=ChildEnd(None, portable_error(exc), Usage()))
        return future

    def _parent_host(self, wire: WireReply) -> int:
        return self.server.parent_hosts.get(wire.child_id, 0)

    def child_expire(self, child_id: str, token: str, timeout: float) -> None:
        """The parent's deadline for one run of a child of this host passed."""
        with self._lock:
            entry = self.runs.get(token)
        if entry is not None:
            self.server.local.tell(child_id, ExpireRun(entry[0], timeout))

    # -- on a parent's host ---------------------------------------------------------------------

    def ended(
        self, token: str, end: ChildEnd | None = None, error: BaseException | None = None
    ) -> None:
        """A remote child's run ended (``end``), or the calls for it failed: tell its parent.

        Once per run: the first verdict counts.
        """
        entry = self.waiting.pop(token, None)
        if entry is None:
            return
        stand_in, reply = entry
        stand_in.forget_token(reply)
        node = stand_in.node
        if error is not None and not host_gone(error):  # it could not even be sent
            end, error = ChildEnd(None, portable_error(error), Usage()), None
        if error is not None:
            lost = HostLostError(
                f"the host of subagent {node.agent_id!r} died during its run; what it had in "
                "flight has an unknown outcome (its log says which calls)",
                agent_id=node.agent_id,
            )
            lost.__cause__ = error
            stand_in.remote_alive = False
            # The subtree's logs are closed before the parent hears of it: whatever the
            # parent does next, the store already says what was interrupted.
            self.server.recover_lost(
                node, then=lambda: self._deliver(stand_in, reply, ChildEnd(None, lost, Usage()))
            )
            return
        if not isinstance(end, ChildEnd):
            end = ChildEnd(None, HostLostError(f"unexpected answer {end!r}"), Usage())
        if isinstance(end.error, HostLostError) and end.error.agent_id == node.agent_id:
            # Its host refused to start it twice (a host before it died during its run): the
            # subtree's logs are closed first, as when the host is seen to die.
            stand_in.remote_alive = False
            lost_end = end
            self.server.recover_lost(node, then=lambda: self._deliver(stand_in, reply, lost_end))
            return
        self._deliver(stand_in, reply, end)

    def abandon(self, token: str, child_id: str, timeout: float) -> None:
        """The child's host did not report the end of a run past its deadline: stop waiting."""
        entry = self.waiting.pop(token, None)
        if entry is None:
            return  # it ended in time
        stand_in, reply = entry
        stand_in.forget_token(reply)
        _log.warning("a child's host did not answer past its deadline", agent_id=child_id)
        error = RunTimeoutError(
            f"subagent {child_id!r} timed out after {timeout:g} s, and its host did not "
            "confirm that it stopped",
            agent_id=child_id,
        )
        self._deliver(stand_in, reply, ChildEnd(None, error, Usage()))

    def _deliver(self, stand_in: RemoteChild, reply: Any, end: ChildEnd) -> None:
        node = stand_in.node
        self.server.stream_in(node.parent_id or "", end.events)
        local = self.server.local
        assert node.parent_id is not None
        if isinstance(reply, DelegateReply):
            local.tell(node.parent_id, DelegateDone(reply, end.result, end.error, end.tree_usage))
        else:
            local.tell(
                node.parent_id,
                ChildFinished(
                    reply.run_id,
                    reply.call_id,
                    reply.child_id,
                    result=end.result,
                    error=end.error,
                    tree_usage=end.tree_usage,
                ),
            )
        finish = Finish(
            reply, end.result, end.error if isinstance(end.error, ActorsError) else None
        )
        if end.error is not None and finish.error is None:
            finish = Finish(reply, None, HostLostError(str(end.error), agent_id=node.agent_id))
        suspended = end.result is not None and end.result.status == "suspended"
        if not suspended and not node.keep:
            stand_in.remote_alive = False  # its host stops it by itself
        local.child_done(node, finish)


def shared_above(child: AgentNode) -> tuple[Budget, ...]:
    """The shared budgets that cover ``child`` from above (not its spec's), outermost first."""
    ledger = child.ledger
    if ledger is not None and child.spec.budget is not None:
        ledger = ledger.parent  # the child's own budget travels with its spec
    if ledger is None:
        return ()
    chain = reversed(list(ledger.chain()))
    return tuple(above.budget for above in chain if above.budget.shared is not None)
