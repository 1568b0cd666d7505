"""`Runtime`: where agents live in this process. The user's face of the in-process host."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from actors.context._events import Clock, system_clock
from actors.context._json import plain_metadata
from actors.exceptions import AgentDefinitionError, UserError
from actors.host._approval import ApprovalHandler
from actors.host._fork import fork_id_for, make_fork, make_rewind
from actors.host._keyed_lock import KeyedLock
from actors.host._persist import SNAPSHOT_EVERY
from actors.host._ref import AgentRef
from actors.host._restore import restore_tree
from actors.loop._agent import Agent
from actors.loop._budget import Budget, check_budget
from actors.loop._default_model import default_model_of, require_models
from actors.loop._loop import TreeLimits
from actors.models._model import Model
from actors.runtime._local import LocalHost
from actors.store._protocol import SessionStore, check_store, has_session, is_store

__all__ = ["Runtime"]

OutputT = TypeVar("OutputT")

_OPEN_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()
_EXIT_HOOK = threading.Lock()
_exit_hook_registered = False


def _shut_down_at_exit(runtime: Runtime) -> None:
    """Shut down, at interpreter exit, every runtime still open then.

    A runtime left open is stopped before the interpreter joins its threads, so its agents'
    last events reach their stores. Shutting down is not cancelling: suspended sessions stay
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


class Runtime:
    """Where agents live in this process: spawns them, routes their messages, stops them all.

    Agents are pykka actors without a thread each: their mailboxes run on a small pool of
    worker threads shared by the whole runtime, model requests on one asyncio loop, blocking
    tools on a bounded pool. So a runtime holds a hundred thousand idle agents, and with
    ``idle_after`` it passivates idle agents to their stores and wakes them on the next
    message. Use it as a context manager so no agent outlives it.

    Args:
        limits: Limits against runaway trees (depth, children per agent, agents per tree).
        workers: Threads that run agents' mailboxes (agents never own one).
        max_tool_threads: Threads for blocking tools running at once.
        clock: Where event timestamps come from.
        idle_after: Seconds after which an idle tree of agents with a store is passivated:
            its state stays in the store and nothing of it in memory but its id; the next
            message to any of its agents activates it. None (the default) keeps agents in
            memory until they stop.
        default_model: The model of every agent whose spec names none: a `Model` or a model
            string such as ``"openai:gpt-4o-mini"``. Without it, the ``ACTORS_DEFAULT_MODEL``
            environment variable; with neither, spawning such an agent is a `UserError`.
        snapshot_every: An agent with a store keeps a snapshot of its folded context there,
            written after every this many events it logs and when it is passivated (if it
            logged 64 or more since the last), so waking it reads the snapshot and the events
            after it instead of its whole log. None writes none (activation then folds the
            whole log). See docs/persistence.md.

    Raises:
        UserError: a count or duration out of range, or a default model that is not one.

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
        workers: int = 4,
        max_tool_threads: int = 32,
        clock: Clock = system_clock,
        idle_after: float | None = None,
        default_model: Model | str | None = None,
        snapshot_every: int | None = SNAPSHOT_EVERY,
    ) -> None:
        for label, count in (("workers", workers), ("max_tool_threads", max_tool_threads)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise UserError(f"Runtime({label}=...) takes a positive int, got {count!r}")
        if idle_after is not None and (
            isinstance(idle_after, bool)
            or not isinstance(idle_after, int | float)
            or idle_after < 0
        ):
            raise UserError(
                f"Runtime(idle_after=...) takes seconds (>= 0) or None, got {idle_after!r}"
            )
        self._host = LocalHost(
            limits=limits or TreeLimits(),
            workers=workers,
            max_tool_threads=max_tool_threads,
            clock=clock,
            idle_after=idle_after,
            default_model=default_model_of(default_model),
            snapshot_every=snapshot_every,
        )
        # Opening a session (is it live? load or create it, register its root) is one step per
        # session id: threads opening one session take turns, different sessions do not wait.
        self._opening = KeyedLock()
        _shut_down_at_exit(self)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every agent of this runtime, then its threads.

        Shutting down is not cancelling: a suspended tree stays suspended in its store, and a
        run in flight is found interrupted when the session is restored.
        """
        self._host.shutdown(timeout)

    @property
    def limits(self) -> TreeLimits:
        """The tree limits of this runtime."""
        return self._host.limits

    @property
    def default_model(self) -> Model | None:
        """The model of agents whose spec names none (before ``ACTORS_DEFAULT_MODEL``), or None."""
        return self._host.default_model

    def resolve_model(self, spec: Agent[Any]) -> Model:
        """The model an agent of ``spec`` runs: its own, ``default_model``, or the env's.

        Raises:
            UserError: none of them names a model.
        """
        return self._host.resolve_model(spec)

    @property
    def idle_after(self) -> float | None:
        """Seconds after which an idle tree with a store is passivated, or None."""
        return self._host.virtual.idle_after

    # -- agents -------------------------------------------------------------------------------

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
        budget: Budget | None = None,
    ) -> AgentRef[OutputT]:
        """Start a root agent for ``agent`` and return a handle to it.

        Args:
            agent: The spec.
            tool_context: The static channel for every tool and descendant: a mapping, a frozen
                dataclass or pydantic model. Never stored or logged.
            metadata: The agent's initial metadata (plain JSON).
            agent_id: The agent's id (`UserError` if an agent of this runtime has it); by
                default the spec's name, made unique in this runtime (``a``, ``a-2``, ...).
            store: Persist every event of the tree here (see `actors.store`).
            session_id: The session's id in the store; a new random id by default.
            approval_handler: Decides, in process, on every call of a tool marked
                ``requires_approval`` anywhere in the tree (instead of surfacing an approval
                request to the host). Takes the `Request`, returns an `Answer` or a bool; runs
                on a tool thread. A handler that raises denies.
            budget: What the agent and all its descendants may spend together (see
                `Budget`); logged, so a restore of the session keeps it.

        Raises:
            UserError: the runtime is shut down, the metadata is not plain JSON, the session
                already holds this agent's events (restore it instead), the runtime
                passivates idle agents (``idle_after``) and no store was given, or an agent of
                the tree has no model (see ``default_model``).
        """
        # Not while open_session opens the same session.
        guard = (
            self._opening.hold(session_id)
            if store is not None and isinstance(session_id, str)
            else contextlib.nullcontext()
        )
        with guard:
            return self._spawn(
                agent,
                tool_context=tool_context,
                metadata=metadata,
                agent_id=agent_id,
                store=store,
                session_id=session_id,
                approval_handler=approval_handler,
                budget=budget,
            )

    def _spawn(
        self,
        agent: Agent[OutputT],
        *,
        tool_context: Any,
        metadata: Mapping[str, Any] | None,
        agent_id: str | None,
        store: SessionStore | None,
        session_id: str | None,
        approval_handler: ApprovalHandler | None,
        new_session: bool = False,
        budget: Budget | None = None,
    ) -> AgentRef[OutputT]:
        host = self._host
        if host.closing:
            raise UserError("this runtime is shut down; create a new Runtime")
        if not isinstance(agent, Agent):
            raise UserError(f"spawn takes an Agent spec, got {type(agent).__name__}")
        require_models(agent, host.default_model)
        check_store(store)
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise UserError(f"session_id must be a non-empty string or None, got {session_id!r}")
        if store is None and self.idle_after is not None:
            raise UserError(
                "this runtime passivates idle agents (idle_after="
                f"{self.idle_after:g}), which needs a store to keep them in: pass store=..."
            )
        initial = plain_metadata(metadata)
        host.toolsets.prepare(agent)  # blocking: open the tree's MCP servers, check names
        reserved = host.unique_id(agent_id or agent.name, explicit=agent_id is not None)
        node = host.spawn_root(
            agent,
            agent_id=reserved,
            tool_context=tool_context,
            metadata=initial,
            store=store,
            session_id=session_id,
            approval_handler=approval_handler,
            new_session=new_session,
            budget=check_budget(budget),
        )
        ref: AgentRef[OutputT] = AgentRef.of(host, node)
        return ref

    def open_session(
        self,
        agent: Agent[OutputT],
        *,
        session_id: str,
        store: SessionStore,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef[OutputT]:
        """The root agent of a session: live here already, restored from ``store``, or new.

        A long-lived process calls it for each incoming message (one session per user or
        conversation) and runs the message on the ref it returns. A new session's root agent
        has the session's id as its id. Threads may open one session at once (two requests of
        one user): they all get its one root agent, and the store holds one.

        Args:
            agent: The root's spec (with its subagents; matched by name on restore).
            session_id: The session.
            store: Where the session lives.
            tool_context: The static channel (given again on every restore; never stored).
            metadata: The initial metadata of a new session (ignored for an existing one).
            approval_handler: As for `spawn`.

        Raises:
            UserError: an empty session id, or ids of the session taken by other agents here.
            AgentDefinitionError: the session's root agent has a spec of another name.
            StoreError: the store failed.
        """
        if not isinstance(session_id, str) or not session_id:
            raise UserError(f"open_session needs a non-empty session_id, got {session_id!r}")
        if not is_store(store):
            raise UserError(f"open_session needs a SessionStore, got {type(store).__name__}")
        known = self._session_ref(agent, store, session_id)  # the usual case: no lock taken
        if known is not None:
            return known
        # Callers opening one session at once (two requests of one user) take turns here: the
        # first restores or creates it, the others find it live.
        with self._opening.hold(session_id):
            known = self._session_ref(agent, store, session_id)
            if known is not None:
                return known
            if has_session(store, session_id):
                return self._restore(
                    session_id,
                    store=store,
                    agents=[agent],
                    tool_context=tool_context,
                    approval_handler=approval_handler,
                )
            return self._spawn(
                agent,
                tool_context=tool_context,
                metadata=metadata,
                agent_id=session_id,
                store=store,
                session_id=session_id,
                approval_handler=approval_handler,
                new_session=True,  # just seen not to be in the store: no second look
            )

    def _session_ref(
        self, agent: Agent[OutputT], store: SessionStore, session_id: str
    ) -> AgentRef[OutputT] | None:
        """The root of the session if it is live or asleep here, checked against ``agent``."""
        root_id = self._host.session_root(store, session_id)
        found = self._known(root_id) if root_id is not None else None
        if found is None:
            return None
        if found.name != agent.name:
            raise AgentDefinitionError(
                f"session {session_id!r} is run by an agent of spec {found.name!r}, not "
                f"{agent.name!r}; open it with that spec (specs are matched by name)"
            )
        ref: AgentRef[OutputT] = found
        return ref

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
            agents: The specs, matched by name (subagents of the given specs are found too);
                agents that ended need none.
            tool_context: The static channel, given again (it is never stored).
            approval_handler: As for `spawn`; approvals already open stay open for ``resume``.

        Raises:
            SessionNotFoundError: no such session in the store.
            AgentDefinitionError: a spec of an agent that comes back was not given.
            UserError: the session is live here already, or agents of this runtime hold its
                agent ids (restore it in another `Runtime`).
        """
        # Not while open_session opens the same session.
        opening = isinstance(session_id, str)
        with self._opening.hold(session_id) if opening else contextlib.nullcontext():
            return self._restore(
                session_id,
                store=store,
                agents=agents,
                tool_context=tool_context,
                approval_handler=approval_handler,
            )

    def _restore(
        self,
        session_id: str,
        *,
        store: SessionStore,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        tool_context: Any,
        approval_handler: ApprovalHandler | None,
    ) -> AgentRef:
        host = self._host
        if host.closing:
            raise UserError("this runtime is shut down; create a new Runtime")
        live = host.session_root(store, session_id)
        if live is not None:
            raise UserError(f"session {session_id!r} is already live in this runtime ({live!r})")
        if store is None:
            raise UserError("restore needs the store that holds the session")
        check_store(store)
        if isinstance(agents, str) or not isinstance(agents, Mapping | Sequence):
            raise UserError(
                "restore takes the session's agent specs: a list of Agents, or a mapping of "
                f"name to Agent, got {type(agents).__name__}"
            )
        for spec in agents.values() if isinstance(agents, Mapping) else agents:
            if isinstance(spec, Agent):
                host.toolsets.prepare(spec)  # blocking: open its MCP servers (and check names)
        node = restore_tree(
            host,
            session_id,
            store=store,
            agents=agents,
            tool_context=tool_context,
            approval_handler=approval_handler,
        )
        return AgentRef.of(host, node)

    def fork(
        self,
        session_id: str,
        *,
        at: int,
        store: SessionStore,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        new_id: str | None = None,
        tool_context: Any = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef:
        """A new session holding the tree as it was just after its root's event ``at``; live.

        Every agent of the tree at that moment comes with the prefix of its log (see
        `SessionStore.fork`: shared by reference, so a fork costs about the same whatever the
        length of the logs), and the fork is restored as `restore` does: nothing before the
        cut runs again (no model request, no tool call); a call in flight at the cut gets a
        result saying it was not started or that its outcome is unknown; open requests stay
        open for ``ref.resume``. The original is not changed and may run at the same time:
        the fork's agents are renamed under its root id (``<new_id>-sub-1``...).

        Args:
            session_id: The session to fork (live here or not).
            at: The seq of the root's event to cut after (``actors sessions log`` lists them).
            store: The store that holds it; the fork is written there.
            agents: The specs, as for `restore` (they may differ from the original's: a what-if
                with another prompt or model).
            new_id: The fork's session id, also its root agent's id; a new
                ``<session_id>-fork-<hex>`` by default.
            tool_context: The static channel, given again (it is never stored).
            approval_handler: As for `spawn`.

        Raises:
            SessionNotFoundError: no such session in the store.
            UserError: ``at`` is not a seq of the root's log, ``new_id`` is taken (in the
                store or by an agent here).
            AgentDefinitionError: a spec of an agent that comes back was not given (the fork
                is deleted again).
        """
        check_store(store)
        if store is None:
            raise UserError("fork needs the store that holds the session")
        fork_id = fork_id_for(session_id, new_id)
        with self._opening.hold(fork_id):
            if self._host.taken(fork_id):
                raise UserError(f"fork: an agent of this runtime has the id {fork_id!r}")
            make_fork(store, session_id, fork_id, at)
            try:
                return self._restore(
                    fork_id,
                    store=store,
                    agents=agents,
                    tool_context=tool_context,
                    approval_handler=approval_handler,
                )
            except BaseException:
                store.delete(fork_id)  # all or nothing: no fork that cannot come up
                raise

    def rewind(
        self,
        session_id: str,
        *,
        at: int,
        store: SessionStore,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        keep_as: str | None = None,
        tool_context: Any = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef:
        """Take the session back to just after its root's event ``at``, under the same id; live.

        A fork that takes the original's place: call it once the user has confirmed. The
        branch it abandons stays readable in the store as ``keep_as`` (by default
        ``<session_id>-rewound-<n>``), whole. The session must not be live here (stop its root
        first); as with `fork`, nothing before ``at`` runs again.

        Raises:
            SessionNotFoundError: no such session in the store.
            UserError: the session is live here, ``at`` is not a seq of the root's log, or
                ``keep_as`` is taken.
            AgentDefinitionError: a spec of an agent that comes back was not given (the
                session is put back as it was).
        """
        check_store(store)
        if store is None:
            raise UserError("rewind needs the store that holds the session")
        with self._opening.hold(session_id):
            live = self._host.session_root(store, session_id)
            if live is not None:
                raise UserError(
                    f"rewind: session {session_id!r} is live in this runtime ({live!r}); "
                    "stop it first (ref.stop())"
                )
            _, undo = make_rewind(store, session_id, at, keep_as)
            try:
                return self._restore(
                    session_id,
                    store=store,
                    agents=agents,
                    tool_context=tool_context,
                    approval_handler=approval_handler,
                )
            except BaseException:
                undo()
                raise

    def ref(self, agent_id: str) -> AgentRef:
        """The handle of any agent of this runtime by id (a child, a passivated agent).

        Raises:
            UserError: no agent of that id is live or passivated here.
        """
        found = self._known(agent_id)
        if found is None:
            raise UserError(f"no agent {agent_id!r} in this runtime")
        return found

    def _known(self, agent_id: str) -> AgentRef | None:
        """The handle of an agent live or passivated here, or None."""
        host = self._host
        with host.lock:
            node = host.nodes.get(agent_id)
            if node is not None:
                return AgentRef.of(host, node)
            dormant = host.virtual.dormant(agent_id)
            if dormant is not None:
                return AgentRef._new(
                    host,
                    agent_id,
                    name=dormant.names.get(agent_id, ""),
                    parent_id=dormant.parents.get(agent_id),
                    session_id=dormant.session_id,
                )
        return None

    def live_agents(self) -> int:
        """How many agents are in memory (passivated ones are not)."""
        return self._host.live_agents()
