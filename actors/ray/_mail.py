"""`PeerMail`: peer messages (``ContextUpdate.send``) between agents of different hosts.

On one host, a peer message is logged in its sender's log with the sending step, handed to
the host once that step is written, and put in its receiver's mailbox, which logs it
(``message_received``); a message numbered at most the last one heard from its sender is a
duplicate and changes nothing. Across hosts the same holds, with a Ray call in between:

- Where: an id this host does not hold is looked up on the other hosts once (`locate`: a
  call to each, ~1 ms, the first time this host sends to that id) and remembered. The look-up
  happens before the tool's result reaches its agent (`find`), so the agent's own check of
  its receivers, in its turn, waits on no other host. A child spread elsewhere is found
  through its stand-in here.
- Order: what this host's agents send to agents of one host goes through one `Lane` (a
  lane of its own, so peer traffic never waits behind a child's run): in order, batched.
- Once: the receiving host answers a call once its receivers have logged the messages
  (`PeerInput`). A call that failed because that host died is sent again, and a host that
  restarted and does not hold a receiver yet (its session is restored when the driver next
  calls it) is asked again for `RESTART_WAIT` seconds; the receiver drops what it heard
  already. A sender whose host died sends its log's messages again when its session is
  restored (`restore_tree`), and the receivers drop those too.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from actors._logging import get_logger
from actors.exceptions import AgentStoppedError
from actors.host import Ask, PeerBatch
from actors.loop._types import PeerMessage, SendMessage
from actors.ray._inputs import PeerInput
from actors.ray._lane import RESEND_DELAY, RESTART_WAIT, Lane, host_gone
from actors.ray._remote_child import RemoteChild
from actors.ray._wire import Missing, Outcome
from actors.runtime import LocalHost

__all__ = ["LOCATE_WAIT", "PeerMail"]

_log = get_logger("actors.ray")

LOCATE_WAIT = 10.0
"""Seconds a host waits for the others to say whether they hold an agent."""

PLACES_REMEMBERED = 100_000
"""Ids of agents of other hosts a host remembers the place of."""


class _PeerEntry:
    """One peer message in a lane to its receiver's host (an `Entry` of `Lane`)."""

    __slots__ = ("_first_missing", "message")

    def __init__(self, message: PeerInput) -> None:
        self.message = message
        self._first_missing: float | None = None

    def sent(self) -> None:
        pass

    def replied(self, reply: Any) -> bool:
        item = self.message
        if isinstance(reply, Missing):
            if reply.restarted:
                # Its host restarted: the receiver comes back when its session is restored.
                now = time.monotonic()
                if self._first_missing is None:
                    self._first_missing = now
                if now - self._first_missing < RESTART_WAIT:
                    return True
            _log.warning(
                "peer message not delivered: its receiver is gone",
                agent_id=item.sender,
                to=item.to,
                message_id=item.message_id,
            )
        elif isinstance(reply, Outcome) and reply.error is not None:
            _log.warning(
                "peer message not delivered",
                agent_id=item.sender,
                to=item.to,
                message_id=item.message_id,
                error=str(reply.error),
            )
        return False

    def lost(self, error: BaseException) -> bool:
        if host_gone(error):
            return True  # maybe logged there, maybe not: the receiver drops a second copy
        _log.warning(
            "peer message not delivered",
            agent_id=self.message.sender,
            to=self.message.to,
            message_id=self.message.message_id,
            error=str(error),
        )
        return False


class _Host(Protocol):
    """What the mail needs of its host (`HostServer`)."""

    index: int
    restarted: bool
    local: LocalHost


class PeerMail:
    """The peer messages of one host's agents to and from agents of other hosts.

    Args:
        host: The host this belongs to.
        hosts: How many hosts the runtime has.
        call: ``call(index, method, *args)`` calls a method of host ``index`` (an ObjectRef).
    """

    def __init__(self, host: _Host, hosts: int, call: Callable[..., Any]) -> None:
        self._host = host
        self._hosts = hosts
        self._call = call
        self._lock = threading.Lock()
        self._places: OrderedDict[str, int] = OrderedDict()  # agent id -> its host
        self._lanes: dict[int, Lane] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="actors-mail")
        self._finder = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="actors-find")

    # -- sending ------------------------------------------------------------------------------

    def locate(self, agent_id: str) -> int | None:
        """The index of the other host that holds ``agent_id``, or None if none does.

        Asks every other host the first time (blocking: a call to each); remembered after.
        """
        with self._lock:
            host = self._places.get(agent_id)
            if host is not None:
                self._places.move_to_end(agent_id)
                return host
        me = self._host.index
        others = [i for i in range(self._hosts) if i != me]
        # Futures, not ray.get: this may run in a host's thread, and Ray warns of blocking gets
        # inside an async actor.
        calls = [self._call(i, "peer_home", agent_id).future() for i in others]
        concurrent.futures.wait(calls, timeout=LOCATE_WAIT)
        for index, call in zip(others, calls, strict=True):
            if not call.done() or call.exception() is not None:
                continue  # that host is down: it holds nothing we can reach now
            if call.result():
                self.remember(agent_id, index)
                return index
        return None

    def remember(self, agent_id: str, host: int) -> None:
        """Note that ``agent_id`` lives on host ``host``."""
        with self._lock:
            self._places[agent_id] = host
            self._places.move_to_end(agent_id)
            if len(self._places) > PLACES_REMEMBERED:
                self._places.popitem(last=False)

    def find(self, agent_ids: Sequence[str], then: Callable[[], None]) -> None:
        """`locate` each of ``agent_ids`` on a thread of the mail's own, then call ``then``.

        A tool's result waits for it before it reaches its agent, so the agent's check of its
        receivers (`exists`, in its own turn) finds them remembered and waits on no host.
        """

        def look_up() -> None:
            try:
                for agent_id in agent_ids:
                    self.locate(agent_id)
            except Exception:
                _log.exception("could not look up the receivers of peer messages")
            finally:
                then()

        try:
            self._finder.submit(look_up)
        except RuntimeError:  # the host is shutting down: the agent's own check decides
            then()

    def exists(self, agent_id: str) -> bool:
        """Whether another host holds ``agent_id``."""
        return self.locate(agent_id) is not None

    def send(self, sender: str, effect: SendMessage) -> bool:
        """Send a logged peer message to its receiver on another host; False: not remote."""
        local = self._host.local
        with local.lock:
            node = local.nodes.get(effect.to)
        if node is not None:
            if not isinstance(node.ref, RemoteChild):
                return False  # it lives here
            host: int | None = node.ref.host
        elif local.taken(effect.to):
            return False
        else:
            host = self.locate(effect.to)
            if host is None:
                return False  # nowhere: the host logs it as not delivered
        item = PeerInput(effect.to, sender, effect.message_id, effect.n, effect.content)
        assert host is not None
        self._lane(host).put(_PeerEntry(item))
        return True

    def drained(self) -> list[concurrent.futures.Future[None]]:
        """Futures set once what was sent so far to each host was answered."""
        with self._lock:
            lanes = list(self._lanes.values())
        return [lane.drained() for lane in lanes]

    def _lane(self, host: int) -> Lane:
        with self._lock:
            lane = self._lanes.get(host)
            if lane is None:
                call = self._call
                lane = self._lanes[host] = Lane(
                    lambda inputs: call(host, "deliver", inputs).future(),
                    retry=_later,
                    pool=self._pool,
                )
            return lane

    def close(self) -> None:
        """Stop sending again (a host shutting down): what waits to go again is given up."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._finder.shutdown(wait=False)

    # -- receiving ----------------------------------------------------------------------------

    def home(self, agent_id: str) -> bool:
        """Whether ``agent_id`` lives on this host (live or starting, not as a stand-in)."""
        local = self._host.local
        with local.lock:
            node = local.nodes.get(agent_id)
        if node is not None:
            return not isinstance(node.ref, RemoteChild)
        return local.taken(agent_id)

    def receive(self, items: Sequence[PeerInput]) -> concurrent.futures.Future[Any] | Missing:
        """Put messages for one receiver in its mailbox, in order, to be applied in one turn.

        Returns a future set once the receiver has logged them, or `Missing`.
        """
        server = self._host
        logged: concurrent.futures.Future[Any] = concurrent.futures.Future()
        batch = PeerBatch(tuple(PeerMessage(i.message_id, i.n, i.sender, i.content) for i in items))
        try:
            # The receiver answers an Ask after its turn, once the turn's events are written.
            server.local.send(items[0].to, Ask(batch, logged))
        except AgentStoppedError:
            return Missing(items[0].to, restarted=server.restarted)
        return logged


def _later(entries: list[Any]) -> list[Any]:
    """Send again after a moment (a host restarting has nothing to wait on but time)."""
    time.sleep(RESEND_DELAY)
    return entries
