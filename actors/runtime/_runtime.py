"""Where agent actors live: `Runtime` spawns them, tracks the tree, and stops them all on exit."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pykka

from actors._logging import get_logger
from actors.context._agent_context import AgentContext
from actors.context._events import Clock, system_clock
from actors.context._frozen import thaw
from actors.context._json import JsonError, json_copy
from actors.exceptions import AgentStoppedError, UserError
from actors.loop._agent import Agent, Subagent
from actors.loop._default_model import default_model_of, require_models, resolve_model
from actors.loop._loop import AgentLoop, TreeLimits
from actors.loop._types import (
    CallTool,
    CancelRun,
    ChildFinished,
    Finish,
    ResumeChild,
    ResumeRun,
    RunChild,
    StartRun,
)
from actors.models._model import Model
from actors.runtime._actor import (
    AgentActor,
    Delegate,
    DelegateReply,
    ExpireRun,
    ParentReply,
    settle,
)
from actors.runtime._effects import ApprovalHandler
from actors.runtime._node import AgentNode
from actors.store._protocol import SessionStore
from actors.store._records import AgentRecord

if TYPE_CHECKING:
    from actors.runtime._ref import AgentRef, TreeNode

__all__ = ["Runtime"]

_log = get_logger("actors.runtime")

OutputT = TypeVar("OutputT")

_OPEN_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()
_EXIT_HOOK = threading.Lock()
_exit_hook_registered = False


def _shut_down_at_exit(runtime: Runtime) -> None:
    """Shut down, at interpreter exit, every runtime still open then.

    Agents' threads are not daemons (a process waits for its live agents, like pykka's), so a
    runtime left open would hang the exit. The hook runs where `concurrent.futures` joins its
    workers, before it: it is registered after the thread pools exist, and such hooks run in
    reverse order of registration. Shutting down is not cancelling: suspended sessions stay
    suspended in their stores.
    """
    global _exit_hook_registered
    _OPEN_RUNTIMES.add(runtime)
    with _EXIT_HOOK:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    threading._register_atexit(_shut_down_open_runtimes)  # type: ignore[attr-defined]


def _shut_down_open_runtimes() -> None:
    for runtime in list(_OPEN_RUNTIMES):
        runtime.shutdown()


ASK_TIMEOUT = 10.0


class Runtime:
    """Owns agent actors: spawns them, tracks their tree, stops every one of them on exit.

    Use it as a context manager so no actor outlives it (pykka's threads are not daemons).

    Args:
        limits: Limits against runaway trees (depth, children per agent, agents per tree).
        max_tool_threads: Threads for sync tools.
        clock: Where event timestamps come from.
        default_model: The model of every agent whose spec names none: a `Model` or a model
            string such as ``"openai:gpt-4o-mini"``. Without it, the ``ACTORS_DEFAULT_MODEL``
            environment variable; with neither, spawning such an agent is a `UserError`.

    Example:
        >>> from actors import Agent
        >>> from actors.testing import ScriptedModel
        >>> with Runtime() as runtime:
        ...     ref = runtime.spawn(Agent("hello", model=ScriptedModel(["Hi!"])))
        ...     ref.run("Hello?").output
        'Hi!'
    """

    def __init__(
        self,
        *,
        limits: TreeLimits | None = None,
        max_tool_threads: int = 32,
        clock: Clock = system_clock,
        default_model: Model | str | None = None,
    ) -> None:
        from actors.runtime._effects import EffectRunner

        self.default_model = default_model_of(default_model)
        self.limits = limits or TreeLimits()
        self.clock = clock
        self.effects = EffectRunner(max_tool_threads)
        self._nodes: dict[str, AgentNode] = {}
        self._live: dict[str, int] = {}  # live actors per tree (by root id)
        self._reserved: set[str] = set()  # ids handed out by spawn, not yet registered
        self._lock = threading.RLock()
        self._closed = False
        _shut_down_at_exit(self)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every agent this runtime started, then the effect threads."""
        # No CancelRun: shutting down is not cancelling. A suspended tree stays suspended in its
        # store, and a run in flight is found interrupted when the session is restored.
        with self._lock:
            if self._closed:
                return
            # Under the lock: an agent starting now (a child a busy parent spawns) is either in
            # this list or refused by `start_node`, never started after it.
            self._closed = True
            refs = [n.ref for n in self._nodes.values() if n.ref is not None and n.ref.is_alive()]
        # Ask them all to stop, then wait: stopping one by one costs a round trip each.
        stopping = []
        for ref in reversed(refs):
            with contextlib.suppress(pykka.ActorDeadError):
                stopping.append(ref.stop(block=False))
        for future in stopping:
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                future.get(timeout=timeout)
        self.effects.close()

    # -- spawning -----------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down."""
        return self._closed

    @property
    def lock(self) -> threading.RLock:
        """Guards the agent records."""
        return self._lock

    def register(self, node: AgentNode) -> None:
        """Record an agent that has no live actor (a finished child of a restored tree)."""
        with self._lock:
            self._nodes[node.agent_id] = node
            self._reserved.discard(node.agent_id)

    def start_node(self, node: AgentNode, loop: AgentLoop) -> None:
        """Start the actor of an agent around its loop (fresh, or rebuilt by a restore)."""
        node.status = loop.status
        with self._lock:
            if self._closed:
                raise UserError("this runtime is shut down; create a new Runtime")
            self._nodes[node.agent_id] = node
            self._reserved.discard(node.agent_id)
            self._live[node.root_id] = self._live.get(node.root_id, 0) + 1
            node.counted = True
        self.persist(node)
        with self._lock:
            if self._closed:  # shut down meanwhile: this agent would outlive its runtime
                self.forget(node)
                node.status = "stopped"
                raise UserError("this runtime is shut down; create a new Runtime")
            node.ref = AgentActor.start(self, node, loop)

    def restore(
        self,
        session_id: str,
        *,
        store: SessionStore,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        tool_context: Any = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef:
        """Rebuild a persisted tree and return a handle on its root.

        The root, every suspended agent and every kept child get a live actor again, each with
        its context rebuilt from its log. Before anything new runs, an interrupted turn is
        closed: each tool call without a result gets a synthetic one saying it was not started,
        or that its outcome is unknown (it may have run); restoring twice adds nothing. Open
        requests survive: ``ref.resume`` works as it would have before the crash.

        Args:
            session_id: The session to restore.
            store: The store that holds it.
            agents: The specs, matched by name (subagents of the given specs are found too).
            tool_context: The static channel, given again (it is never stored).
            approval_handler: As for `spawn`; approvals already open stay open for ``resume``.

        Raises:
            SessionNotFoundError: no such session in the store.
            AgentDefinitionError: a spec named in the session was not given.
            UserError: the session is live here already, or agents of this runtime hold its
                agent ids (restore it in another `Runtime`).
        """
        from actors.runtime._restore import restore_tree

        for stored_id in (n.agent_id for n in self.nodes() if n.session_id == session_id):
            raise UserError(
                f"session {session_id!r} is already live in this runtime (agent {stored_id!r})"
            )
        return restore_tree(
            self,
            session_id,
            store=store,
            agents=agents,
            tool_context=tool_context,
            approval_handler=approval_handler,
        )

    def resolve_model(self, spec: Agent[Any]) -> Model:
        """The model an agent of ``spec`` uses: its own, else ``default_model``, else the env's."""
        return resolve_model(spec, self.default_model)

    def _unique_id(self, wanted: str) -> str:
        """A free id, reserved at once: two threads spawning one name get two ids."""
        with self._lock:
            taken = self._nodes.keys() | self._reserved
            agent_id, n = wanted, 2
            while agent_id in taken:
                agent_id, n = f"{wanted}-{n}", n + 1
            self._reserved.add(agent_id)
            return agent_id

    def spawn(
        self,
        agent: Agent[OutputT],
        *,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        store: SessionStore | None = None,
        session_id: str | None = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef[OutputT]:
        """Start a root agent actor for ``agent`` and return a handle to it.

        Args:
            agent: The spec.
            tool_context: The static channel for every tool and descendant: a mapping, a frozen
                dataclass or pydantic model. Never stored or logged.
            metadata: The agent's initial metadata (plain JSON).
            agent_id: The agent's id; the spec's name by default (made unique in this runtime).
            store: Persist every event of the tree here (see `actors.store`).
            session_id: The session's id in the store; a new random id by default.
            approval_handler: Decides, in process, on every call of a tool marked
                ``requires_approval`` anywhere in the tree (instead of surfacing an approval
                request to the host). Takes the `Request`, returns an `Answer` or a bool; runs
                on a tool thread. A handler that raises denies.

        Raises:
            UserError: the runtime is shut down, the metadata is not plain JSON, or the
                session already holds this agent's events (restore it instead).
        """
        if self._closed:
            raise UserError("this runtime is shut down; create a new Runtime")
        if not isinstance(agent, Agent):
            raise UserError(f"spawn takes an Agent spec, got {type(agent).__name__}")
        require_models(agent, self.default_model)
        try:
            initial = json_copy(dict(metadata or {}), "metadata")
        except JsonError as exc:
            raise UserError(f"{exc}; metadata must be plain JSON") from None
        agent_id = self._unique_id(agent_id or agent.name)
        context = AgentContext(
            agent_id,
            name=agent.name,
            metadata=initial,
            max_iterations=agent.max_iterations,
            clock=self.clock,
        )
        node = AgentNode(agent_id, agent.name, None, agent_id, 0, agent, tool_context)
        node.approval_handler = approval_handler
        if store is not None:
            try:
                self._open_session(node, store, session_id)
            except BaseException:
                with self._lock:
                    self._reserved.discard(agent_id)
                raise
            node.buffer.extend(context.events)  # the initial metadata, logged before spawn
        self._start(node, context)
        from actors.runtime._ref import AgentRef

        ref: AgentRef[OutputT] = AgentRef(self, node)
        return ref

    def _start(self, node: AgentNode, context: AgentContext) -> None:
        loop = AgentLoop(
            node.spec,
            context,
            model=self.resolve_model(node.spec),
            tool_context=node.tool_context,
            depth=node.depth,
            limits=self.limits,
            approval_handler=node.approval_handler is not None,
        )
        self.start_node(node, loop)

    def node(self, agent_id: str) -> AgentNode:
        """The record of an agent of this runtime."""
        with self._lock:
            try:
                return self._nodes[agent_id]
            except KeyError:
                raise UserError(f"no agent {agent_id!r} in this runtime") from None

    def nodes(self) -> list[AgentNode]:
        """Every agent record, in spawn order."""
        with self._lock:
            return list(self._nodes.values())

    def tree_of(self, agent_id: str) -> TreeNode:
        """The hierarchy under ``agent_id`` as it stands now."""
        from actors.runtime._ref import TreeNode

        node = self.node(agent_id)
        with self._lock:
            children = [self._nodes[c] for c in node.children if c in self._nodes]
        return TreeNode(
            node.agent_id,
            node.name,
            node.parent_id,
            node.status,
            node.step,
            node.tool,
            tuple(self.tree_of(child.agent_id) for child in children),
        )

    def live_agents(self) -> int:
        """How many agent actors are running."""
        return sum(1 for n in self.nodes() if n.alive)

    # -- children -----------------------------------------------------------------------------

    def _tree_size(self, root_id: str) -> int:
        with self._lock:  # a counter, not a scan: a fan-out spawns a thousand children
            return self._live.get(root_id, 0)

    def run_child(
        self, parent: AgentNode, parent_ref: pykka.ActorRef[Any], effect: RunChild
    ) -> None:
        """Carry out a parent's `RunChild`: spawn (or reuse) the child, start its run."""
        reply = ParentReply(parent_ref, effect.run_id, effect.call_id, effect.child_id)
        if effect.spawn:
            if self._tree_size(parent.root_id) >= self.limits.max_agents:
                error: Exception = UserError(
                    f"max agents in one tree ({self.limits.max_agents}) reached"
                )
                parent_ref.tell(
                    ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error)
                )
                return
            child = self._spawn_child(
                parent, effect.child_id, effect.subagent.agent, effect.metadata, effect.tool_context
            )
            child.keep = effect.subagent.keep
        else:
            child = self.node(effect.child_id)
            if not child.alive:
                error = AgentStoppedError(f"kept child {effect.child_id!r} is no longer running")
                parent_ref.tell(
                    ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error)
                )
                return
        assert child.ref is not None
        child.run_timeout = effect.timeout
        child.ref.tell(StartRun(effect.task, "", reply))
        self._arm_timeout(child, reply, effect.timeout)

    def _spawn_child(
        self,
        parent: AgentNode,
        child_id: str,
        spec: Agent[Any],
        metadata: Mapping[str, Any],
        tool_context: Any,
    ) -> AgentNode:
        context = AgentContext(
            child_id,
            name=spec.name,
            parent_id=parent.agent_id,
            # A deep copy: nothing the child does reaches the parent's metadata.
            metadata=thaw(metadata),
            max_iterations=spec.max_iterations,
            clock=self.clock,
        )
        child = AgentNode(
            child_id,
            spec.name,
            parent.agent_id,
            parent.root_id,
            parent.depth + 1,
            spec,
            tool_context,  # the loop's choice: the parent's (the same object), or narrowed
            store=parent.store,
            session_id=parent.session_id,
            approval_handler=parent.approval_handler,
        )
        child.buffer.extend(context.events)
        with self._lock:
            child.position = len(self._nodes)
            parent.children.append(child_id)
        self._start(child, context)
        return child

    def _arm_timeout(
        self, child: AgentNode, reply: ParentReply | DelegateReply, timeout: float
    ) -> None:
        def expire() -> None:
            # The child decides: only the run this timer was armed for may expire (a kept child
            # may be on its next task by now).
            ref = child.ref
            if ref is not None and ref.is_alive():
                with contextlib.suppress(pykka.ActorDeadError):
                    ref.tell(ExpireRun(reply, timeout))

        self.effects.call_later(timeout, expire)

    def resume_child(self, parent_ref: pykka.ActorRef[Any], effect: ResumeChild) -> None:
        """Route answers down to a suspended child."""
        child = self.node(effect.child_id)
        reply = ParentReply(parent_ref, effect.run_id, effect.call_id, effect.child_id)
        if child.ref is None or not child.alive:
            error = AgentStoppedError(f"child {effect.child_id!r} is no longer running")
            parent_ref.tell(
                ChildFinished(effect.run_id, effect.call_id, effect.child_id, error=error)
            )
            return
        child.ref.tell(ResumeRun(effect.answers, reply))
        # The resumed run gets its deadline again (the first one ended with the suspension).
        self._arm_timeout(child, reply, self._run_timeout(child))

    def _run_timeout(self, child: AgentNode) -> float:
        if child.run_timeout is not None:
            return child.run_timeout
        # Restored: the parent's spec holds the deadline of the subagent this child runs.
        parent = self._nodes.get(child.parent_id or "")
        if parent is not None:
            for subagent in parent.spec.subagent_map.values():
                if subagent.agent is child.spec:
                    return subagent.timeout
        return Subagent(child.spec).timeout  # the default

    def child_done(self, child: AgentNode, effect: Finish) -> None:
        """A child answered its parent: stop it unless it is kept or waits on a request."""
        if effect.result is not None and effect.result.status == "suspended":
            return
        if child.keep:  # alive, waiting for its parent's next task
            child.status = "idle"
        elif effect.error is None and effect.result is not None:
            child.status = "finished" if effect.result.status == "completed" else "cancelled"
        else:
            child.status = "failed"
        if not child.keep and child.ref is not None:
            self._stop_subtree(child, block=False)

    def cancel_agent(self, agent_id: str, reason: str) -> None:
        """Cancel an agent's run (and, through it, its descendants')."""
        node = self.node(agent_id)
        if node.ref is not None and node.alive:
            node.ref.tell(CancelRun(reason))

    def _stop_subtree(self, node: AgentNode, *, block: bool) -> None:
        # Top-down: a parent stopped first cannot mistake its children's stopping for faults
        # and take another step with their errors.
        if node.ref is not None and node.alive:
            status = node.status
            with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
                node.ref.stop(block=block, timeout=ASK_TIMEOUT if block else None)
            node.status = status if status in ("finished", "failed", "cancelled") else "stopped"
        for child_id in list(node.children):
            child = self._nodes.get(child_id)
            if child is not None and child.alive:
                self._stop_subtree(child, block=block)

    def stop_agent(self, agent_id: str) -> None:
        """Stop an agent and all its descendants."""
        self._stop_subtree(self.node(agent_id), block=True)

    def forget(self, node: AgentNode) -> None:
        """Called by an actor as it stops: it no longer counts toward its tree's size."""
        with self._lock:
            if node.counted:
                node.counted = False
                self._live[node.root_id] -= 1

    def persist(self, node: AgentNode) -> None:
        """Write the agent's new events (one transaction) and its status, if it has a store.

        Called after each input the agent handles (a step) and before any result is reported,
        so a reported result is always on disk.

        Raises:
            StoreError: the store failed; the events stay buffered for the next attempt.
        """
        store, session_id = node.store, node.session_id
        if store is None or session_id is None:
            return
        if node.saved_status is None:  # a store knows an agent before its events
            store.put_agent(session_id, self._record(node))
            node.saved_status = node.status
        if node.buffer:
            batch = list(node.buffer)
            store.append_events(session_id, node.agent_id, batch)
            del node.buffer[: len(batch)]
        if node.status != node.saved_status:
            store.put_agent(session_id, self._record(node))
            node.saved_status = node.status

    @staticmethod
    def _record(node: AgentNode) -> AgentRecord:
        return AgentRecord(node.agent_id, node.parent_id, node.name, node.status, node.position)

    def _open_session(self, node: AgentNode, store: SessionStore, session_id: str | None) -> None:
        node.store = store
        node.session_id = session_id or uuid.uuid4().hex
        store.create_session(
            node.session_id, root_agent_id=node.agent_id, data={"agent": node.spec.name}
        )
        # A fresh context's events would collide with the stored ones at every seq.
        if store.last_seq(node.session_id, node.agent_id) >= 0:
            raise UserError(
                f"session {node.session_id!r} already holds agent {node.agent_id!r}; continue "
                "it with Runtime.restore, or spawn with another session_id"
            )

    # -- delegation from tools ----------------------------------------------------------------

    def delegator_for(self, node: AgentNode, effect: CallTool) -> Callable[..., Any]:
        """The function behind ``ctx.delegate`` for a tool call of ``node``."""

        def delegate(
            agent: Agent[Any], task: str, /, *, timeout: float
        ) -> concurrent.futures.Future[Any]:
            if not isinstance(agent, Agent):
                raise UserError(f"delegate() takes an Agent spec, got {type(agent).__name__}")
            if not isinstance(task, str) or not task.strip():
                raise UserError("delegate() needs a non-empty task string")
            if timeout <= 0:
                raise UserError(f"delegate() needs a positive timeout, got {timeout}")
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            ref = node.ref
            if ref is None or not ref.is_alive():
                settle(future, error=AgentStoppedError(f"agent {node.agent_id!r} stopped"))
                return future
            # The child's deadline is armed when it starts, so the future always ends.
            ref.tell(Delegate(agent, task, future, effect.ctx.metadata, timeout))
            return future

        return delegate

    def start_delegation(
        self, parent: AgentNode, parent_ref: pykka.ActorRef[Any], loop: AgentLoop, message: Delegate
    ) -> None:
        """Spawn a child for a tool's ``ctx.delegate`` call."""
        child_id: str | None = None
        refusal: str | None = None
        # The tree-wide limit first: a refused delegation must book nothing.
        if self._tree_size(parent.root_id) >= self.limits.max_agents:
            refusal = f"max agents in one tree ({self.limits.max_agents}) reached"
        else:
            child_id, refusal = loop.begin_delegation(message.agent, message.task)
        if child_id is None or refusal is not None:
            settle(message.future, error=UserError(f"delegation refused: {refusal}"))
            return
        child = self._spawn_child(
            parent, child_id, message.agent, message.metadata, parent.tool_context
        )
        reply = DelegateReply(parent_ref, child_id, message.future)
        assert child.ref is not None
        child.ref.tell(StartRun(message.task, "", reply))
        self._arm_timeout(child, reply, message.timeout)
