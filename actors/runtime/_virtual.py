"""Virtual agents: idle trees sleep in their stores and wake on the next message.

A tree of agents that sits idle is passivated to its store, and woken by the next message to
any of its agents.

Passivation works on a whole tree (a root and the agents of it that are alive: kept children,
suspended children), because a parent and its live children refer to each other. It happens
on this module's own thread, in three steps: a *fence* makes every new message to the tree's
agents wait in the tree's `Dormant` record instead of their mailboxes; each agent is asked, in
its own turn, whether it is idle (no run in flight; a suspended run counts as idle); if all are,
each logs ``passivated``, writes its log and stops, and the tree is dormant — otherwise the
fence is lifted and the waiting messages go to the mailboxes, in order. A message to a dormant
tree schedules its activation: the session is restored from the store (each agent logs
``activated``) and the waiting messages are delivered in the order they came.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import pykka

from actors._logging import get_logger
from actors.exceptions import AgentStoppedError
from actors.host._messages import Ask, HostReply, Passivate, Query, settle
from actors.host._node import AgentNode
from actors.host._restore import RestoreHost, restore_tree
from actors.host._tombstone import TreeNode
from actors.loop._agent import Agent
from actors.loop._types import ResumeRun, StartRun

if TYPE_CHECKING:
    from actors.context._events import Event
    from actors.host._approval import ApprovalHandler
    from actors.store._protocol import SessionStore

__all__ = ["Dormant", "PassivatingHost", "Passivation"]


class PassivatingHost(RestoreHost, Protocol):
    """What passivation needs of its host (`LocalHost`): its registry, lock and sessions."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...
    @property
    def nodes(self) -> dict[str, AgentNode]: ...
    @property
    def sessions(self) -> dict[str, tuple[SessionStore, str]]: ...
    @property
    def closing(self) -> bool: ...
    def release_session(self, store: SessionStore, session_id: str) -> None: ...


_log = get_logger("actors.runtime")

ASK_TIMEOUT = 10.0


def _WAKE() -> None:
    """A job that does nothing: it wakes the thread to look at new candidates."""


@dataclass(eq=False, slots=True)
class Dormant:
    """A tree out of memory (or being put there): how to wake it, and what waits for it."""

    root_id: str
    session_id: str
    store: SessionStore
    specs: tuple[Agent[Any], ...]
    tool_context: Any = field(repr=False)
    approval_handler: ApprovalHandler | None
    ids: tuple[str, ...]
    statuses: dict[str, str]
    names: dict[str, str]
    parents: dict[str, str | None]
    listeners: dict[str, list[Callable[[Event], None]]] = field(repr=False)
    waiting: list[tuple[str, Any]] = field(default_factory=list, repr=False)
    state: str = "fenced"  # fenced (still live) | dormant | activating
    # Set once the store no longer holds the session for this process (asleep): an activation
    # claims it only after that, or the release would undo its claim.
    released: threading.Event | None = field(default=None, repr=False)

    def tree_view(self, agent_id: str) -> TreeNode:
        """The passivated hierarchy under ``agent_id``."""
        children = tuple(
            self.tree_view(child) for child, parent in self.parents.items() if parent == agent_id
        )
        return TreeNode(
            agent_id,
            self.names.get(agent_id, ""),
            self.parents.get(agent_id),
            self.statuses.get(agent_id, "idle"),
            0,
            None,
            children,
        )


class Passivation:
    """Passivates idle trees of a `LocalHost` and activates them on demand.

    Args:
        host: The host.
        idle_after: Seconds a tree must sit idle before it is passivated; None turns automatic
            passivation off (explicit `passivate` still works for agents with a store).
    """

    def __init__(self, host: PassivatingHost, idle_after: float | None) -> None:
        self._host = host
        self.idle_after = idle_after
        self._index: dict[str, Dormant] = {}  # every agent id of every fenced/dormant tree
        self._candidates: deque[tuple[float, str]] = deque()  # (idle since, root id)
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stopping: set[str] = set()  # agents stopping to be passivated
        self._asleep = False  # the thread waits with no timeout (no candidate was due)

    # -- what the host asks -------------------------------------------------------------------

    def holds(self, agent_id: str) -> bool:
        """Whether the id belongs to a fenced or dormant tree (called under the host's lock)."""
        dormant = self._index.get(agent_id)
        return dormant is not None and dormant.state != "activating"

    def passivating(self, agent_id: str) -> bool:
        """Whether the agent is stopping to be passivated (so it leaves no tombstone)."""
        return agent_id in self._stopping

    def dormant(self, agent_id: str) -> Dormant | None:
        """The record of the tree holding the agent, if it is fenced or dormant."""
        with self._host.lock:
            return self._index.get(agent_id)

    def deliver(self, agent_id: str, message: Any, incarnation: str | None = None) -> bool:
        """Hold a message for an agent of a fenced or dormant tree, under the host's lock.

        Schedules the tree's activation if it is dormant. False if the agent is not held (or
        is held for another life than ``incarnation``).
        """
        dormant = self._index.get(agent_id)
        if dormant is None or (incarnation is not None and incarnation != dormant.session_id):
            return False
        dormant.waiting.append((agent_id, message))
        if dormant.state == "dormant":
            dormant.state = "activating"
            self._submit(lambda: self._activate(dormant))
        return True

    def observe(self, node: AgentNode, idle: bool) -> None:
        """An agent handled a message (from its own turn)."""
        if self.idle_after is None or node.tree.store is None:
            return
        now = time.monotonic()
        node.tree.last_active = now
        if idle:
            self._candidates.append((now, node.tree.root_id))
            self._ensure_thread()
            if self._asleep:  # the thread waits for nothing in particular: it has work now
                self._asleep = False
                self._jobs.put(_WAKE)

    def drop(self, agent_id: str) -> None:
        """Forget a dormant tree (``ref.stop`` of one of its agents); it stays in its store."""
        with self._host.lock:
            dormant = self._index.get(agent_id)
            if dormant is None or dormant.state != "dormant":
                return
            for member in dormant.ids:
                if self._index.get(member) is dormant:
                    del self._index[member]
            if self._host.sessions.get(dormant.session_id, (None, ""))[1] == dormant.root_id:
                del self._host.sessions[dormant.session_id]
            waiting, dormant.waiting = dormant.waiting, []
        for _, message in waiting:
            _refuse(message, AgentStoppedError(f"agent {agent_id!r} was stopped"))

    def forget(self, node: AgentNode) -> None:
        """An agent's actor stopped."""
        self._stopping.discard(node.agent_id)

    # -- the thread ---------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is not None or self._closed:
            return
        with self._host.lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name="actors-passivation", daemon=True
            )
            self._thread.start()

    def _submit(self, job: Callable[[], None]) -> None:
        self._ensure_thread()
        self._jobs.put(job)

    def _run(self) -> None:
        while True:
            timeout: float | None = None  # nothing is due: sleep until a job or a candidate
            if self._candidates and self.idle_after is not None:
                due = self._candidates[0][0] + self.idle_after
                timeout = max(0.0, due - time.monotonic())
            else:
                self._asleep = True
                if self._candidates:  # one came in as the flag went up: look again
                    self._asleep = False
                    continue
            try:
                job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                job = None
            else:
                if job is None:
                    return
            self._asleep = False
            if job is not None and job is not _WAKE:
                try:
                    job()
                except Exception:
                    _log.exception("a passivation job failed")
            self._sweep()

    def _sweep(self) -> None:
        if self.idle_after is None:
            return
        now = time.monotonic()
        seen: set[str] = set()
        while self._candidates and self._candidates[0][0] + self.idle_after <= now:
            since, root_id = self._candidates.popleft()
            if root_id in seen:
                continue
            with self._host.lock:
                root = self._host.nodes.get(root_id)
            if root is None or root.tree.last_active > since:
                continue  # gone, or active since: a later entry stands for it
            seen.add(root_id)
            try:
                self._passivate(root)  # a lone agent sleeps on its own: no waiting here
            except Exception:
                _log.exception("passivation failed", agent_id=root_id)

    def close(self) -> None:
        """Stop the thread (dormant trees stay in their stores)."""
        self._closed = True
        self._jobs.put(None)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    # -- passivating ----------------------------------------------------------------------------

    def passivate(self, agent_id: str, timeout: float = ASK_TIMEOUT) -> bool:
        """Passivate the tree of ``agent_id`` now if it is idle; whether it was."""
        done: Future[bool] = Future()

        def job() -> None:
            try:
                with self._host.lock:
                    node = self._host.nodes.get(agent_id)
                    root = self._host.nodes.get(node.tree.root_id) if node is not None else None
                slept = self._passivate(root) if root is not None else None
                done.set_result(slept is not None and slept.result(timeout))
            except BaseException as exc:
                done.set_exception(exc)

        self._submit(job)
        return done.result(timeout)

    def _members(self, root: AgentNode) -> list[AgentNode]:
        """The tree's agents with a live actor, parents first (under the host's lock)."""
        out, todo = [], [root]
        while todo:
            node = todo.pop(0)
            out.append(node)
            todo.extend(
                child
                for child_id in node.children
                if (child := self._host.nodes.get(child_id)) is not None
            )
        return out

    def _passivate(self, root: AgentNode) -> Future[bool]:
        """Put a tree to sleep if it is idle; the future tells whether it did.

        A lone agent (the usual assistant) sleeps in one turn of its own: it checks it is
        idle and stops in the same turn, and nothing here waits for it. A tree with live
        children is checked agent by agent first (see the module's docstring).
        """
        result: Future[bool] = Future()
        host = self._host
        tree = root.tree
        if tree.store is None or tree.session_id is None or host.closing:
            result.set_result(False)
            return result
        # 1. The fence: from now on messages to the tree wait in its record.
        with host.lock:
            members = self._members(root) if host.nodes.get(root.agent_id) is root else []
            if not members or any(m.agent_id in self._index for m in members):
                result.set_result(False)
                return result
            dormant = Dormant(
                root_id=root.agent_id,
                session_id=tree.session_id,
                store=tree.store,
                specs=tuple({id(m.spec): m.spec for m in members}.values()),
                tool_context=root.tool_context,
                approval_handler=tree.approval_handler,
                ids=tuple(m.agent_id for m in members),
                statuses={m.agent_id: m.status for m in members},
                names={m.agent_id: m.name for m in members},
                parents={m.agent_id: m.parent_id for m in members},
                listeners={m.agent_id: list(m.listeners) for m in members if m.listeners},
            )
            for member in members:
                self._index[member.agent_id] = dormant
        if len(members) > 1:
            # 2. Everything sent before the fence is handled before each agent answers.
            try:
                idle = all(
                    m.ref is not None and m.ref.ask(Query("idle"), timeout=ASK_TIMEOUT)
                    for m in members
                )
            except (pykka.ActorDeadError, pykka.Timeout):
                idle = False
            if not idle or host.closing:
                self._lift(dormant)
                result.set_result(False)
                return result
        # 3. Each agent logs ``passivated``, writes its log and stops, in a turn of its own.
        with host.lock:
            self._stopping.update(dormant.ids)
        pending = [len(members)]
        slept = [True]

        def one_done(done: Future[bool]) -> None:
            ok = not done.cancelled() and done.exception() is None and done.result()
            with host.lock:
                slept[0] = slept[0] and ok
                pending[0] -= 1
                if pending[0]:
                    return
            self._settled(dormant, members, slept[0])
            result.set_result(slept[0])

        for member in members:
            done: Future[bool] = Future()
            done.add_done_callback(one_done)
            try:
                if member.ref is None:
                    raise pykka.ActorDeadError(member.agent_id)
                member.ref.tell(Passivate(done))
            except pykka.ActorDeadError:
                done.set_result(False)
        return result

    def _settled(self, dormant: Dormant, members: list[AgentNode], slept: bool) -> None:
        """Every agent of a fenced tree answered its `Passivate`."""
        host = self._host
        released: threading.Event | None = None
        with host.lock:
            self._stopping.difference_update(dormant.ids)
            if not slept:
                # Only a lone agent can refuse (a tree was checked idle behind its fence).
                self._lift(dormant)
                return
            dormant.statuses = {m.agent_id: m.status for m in members}
            dormant.state = "dormant"
            waking = bool(dormant.waiting)
            if waking:
                dormant.state = "activating"
                self._submit(lambda: self._activate(dormant))
            else:
                released = dormant.released = threading.Event()
        if released is not None:
            # Asleep, the session may be woken by another process (a service behind a load
            # balancer): this one holds it again when it wakes it.
            try:
                host.release_session(dormant.store, dormant.session_id)
            finally:
                released.set()

    def _lift(self, dormant: Dormant) -> None:
        """Undo a fence, or end an activation: the waiting messages go to the live agents."""
        with self._host.lock:
            for agent_id in dormant.ids:
                if self._index.get(agent_id) is dormant:
                    del self._index[agent_id]
            self._deliver_waiting(dormant)

    def _deliver_waiting(self, dormant: Dormant) -> None:
        # Under the host's lock: nothing sent meanwhile can overtake these.
        waiting, dormant.waiting = dormant.waiting, []
        for agent_id, message in waiting:
            node = self._host.nodes.get(agent_id)
            try:
                if node is None or node.ref is None:
                    raise pykka.ActorDeadError(agent_id)
                node.ref.tell(message)
            except pykka.ActorDeadError:
                _refuse(
                    message,
                    AgentStoppedError(f"agent {agent_id!r} is not running after its activation"),
                )

    # -- activating -----------------------------------------------------------------------------

    def _activate(self, dormant: Dormant) -> None:
        host = self._host
        if dormant.released is not None:  # woken as it fell asleep: let go first, then claim
            dormant.released.wait(ASK_TIMEOUT)
        try:
            restore_tree(
                host,
                dormant.session_id,
                store=dormant.store,
                agents=list(dormant.specs),
                tool_context=dormant.tool_context,
                approval_handler=dormant.approval_handler,
                listeners=dormant.listeners,
                activated=True,
            )
        except Exception as exc:
            _log.exception("activation failed", agent_id=dormant.root_id)
            with host.lock:
                waiting, dormant.waiting = dormant.waiting, []
                dormant.state = "dormant"  # the next message tries again
            for _, message in waiting:
                _refuse(message, exc)
            return
        self._lift(dormant)


def _refuse(message: Any, error: BaseException) -> None:
    """Answer a message that cannot be delivered, if someone waits on it."""
    if isinstance(message, Ask):
        settle(message.future, error=error)
    elif isinstance(message, StartRun | ResumeRun) and isinstance(message.reply, HostReply):
        settle(message.reply.future, error=error)
