"""`RayRuntime`: the same agent trees, on agent hosts that are Ray actors."""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import uuid
import weakref
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from actors.context._json import plain_metadata
from actors.exceptions import AgentDefinitionError, HostLostError, UserError
from actors.host import AgentRef, ApprovalHandler, KeyedLock
from actors.loop._agent import PLACEMENTS, Agent
from actors.loop._budget import Budget, check_budget
from actors.loop._loop import TreeLimits
from actors.models._model import Model
from actors.ray._actor import AgentHostActor
from actors.ray._client import RayClient, Root, wait_for
from actors.ray._lane import RESEND_DELAY, RESTART_WAIT
from actors.ray._server import HostConfig
from actors.ray._wire import RootInfo, StoreRecipe, TreeSeed, check_travels
from actors.store._protocol import SessionStore, has_session

__all__ = ["RayRuntime"]

OutputT = TypeVar("OutputT")

StoreLike = SessionStore | Callable[[], SessionStore]

_TOOL_CONTEXT_HINT = (
    "pass plain values (settings, ids, URLs) and build connections on each host with "
    "RayRuntime(tool_context_factory=...)"
)
_SPEC_HINT = (
    "define its tools, models and output types in an importable module, and give models "
    "without state that cannot travel (e.g. no http_client of your own)"
)

_OPEN: weakref.WeakSet[RayRuntime] = weakref.WeakSet()
_EXIT_HOOK = threading.Lock()
_exit_hook_registered = False


def _shut_down_at_exit(runtime: RayRuntime) -> None:
    """Shut ``runtime`` down at interpreter exit if it is still open then.

    The hook is registered after ``ray.init``, so it runs before Ray's own exit hook
    disconnects the driver (exit hooks run last registered first).
    """
    global _exit_hook_registered
    _OPEN.add(runtime)
    with _EXIT_HOOK:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    atexit.register(_shut_down_open_runtimes)


def _shut_down_open_runtimes() -> None:
    for runtime in list(_OPEN):
        runtime.shutdown()


class RayRuntime:
    """Where agents live when one machine is not enough: agent hosts that are Ray actors.

    Each host is one Ray actor process running the in-process host (pooled mailboxes, an
    asyncio loop for model calls, a tool pool) for many agents. A root agent and its subtree
    live on one host; a `Subagent` with ``placement="spread"`` (or every child, with
    ``placement="spread"`` here) starts on another host, and its run is a Ray call whose result
    comes back to the parent as a message. `AgentRef` works as with `Runtime`: a program moves
    to a cluster by changing the runtime it constructs.

    A host that dies is restarted by Ray. Its runs in flight end with `HostLostError` for
    whoever waited (a parent's model sees it as the subagent call's result); the next call to
    one of its root agents activates it from the store, its interrupted turn closed as
    `Runtime.restore` closes it.

    Args:
        address: The Ray cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``). None
            uses the Ray of this process if it is initialized, else starts a local cluster of
            its own (never one it finds running on the machine: pass ``"auto"`` for that).
        hosts: How many agent hosts (Ray actors) to start.
        store: The store every host writes to: a `SQLiteStore` (hosts on one machine), or a
            function returning a store that every host can reach (``lambda:
            PostgresStore(dsn)``). Used by `spawn` and `open_session` when they get none.
        placement: Where children go whose `Subagent` names no placement, and children of
            ``ctx.delegate``: ``"parent"`` (with their parent) or ``"spread"`` (on another
            host, round-robin).
        limits: Limits against runaway trees, per host.
        workers: Mailbox threads per host.
        max_tool_threads: Threads for blocking tools per host.
        default_model: The model of agents whose spec names none.
        tool_context_factory: Called on each host with a tree's ``tool_context`` (as it
            arrived, unpickled) when the tree, or a spread part of it, arrives there; returns
            what the tools see. Open connections and clients here: they cannot travel.
        max_restarts: How often Ray restarts a host that died (-1: always).
        host_options: More Ray actor options for the hosts (``num_cpus``, ``memory``,
            ``resources``, ``scheduling_strategy``, ``runtime_env``).
        idle_after: Seconds after which an idle tree with a store is passivated on its host
            (put to sleep in the store, nothing in memory); the next message, run or
            `open_session` wakes it. None (the default) keeps agents in memory.

    Raises:
        UserError: an argument out of range, or Ray is not installed.
        WireError: the store, the default model or the factory cannot travel to the hosts.

    Example:
        >>> from actors import Agent
        >>> from actors.ray import RayRuntime
        >>> from actors.testing import ScriptedModel
        >>> with RayRuntime(hosts=2) as runtime:
        ...     ref = runtime.spawn(Agent("hello", model=ScriptedModel(["Hi!"])))
        ...     ref.run("Hello?").output
        'Hi!'
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        hosts: int = 2,
        store: StoreLike | None = None,
        placement: str = "parent",
        limits: TreeLimits | None = None,
        workers: int = 4,
        max_tool_threads: int = 32,
        default_model: Model | None = None,
        tool_context_factory: Callable[[Any], Any] | None = None,
        max_restarts: int = -1,
        host_options: Mapping[str, Any] | None = None,
        idle_after: float | None = None,
    ) -> None:
        for label, count in (
            ("hosts", hosts),
            ("workers", workers),
            ("max_tool_threads", max_tool_threads),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise UserError(f"RayRuntime({label}=...) takes a positive int, got {count!r}")
        if placement not in PLACEMENTS:
            raise UserError(
                f"RayRuntime(placement=...) takes one of {list(PLACEMENTS)}, got {placement!r}"
            )
        if idle_after is not None and (
            isinstance(idle_after, bool)
            or not isinstance(idle_after, int | float)
            or idle_after < 0
        ):
            raise UserError(
                f"RayRuntime(idle_after=...) takes seconds (>= 0) or None, got {idle_after!r}"
            )
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < -1:
            raise UserError(
                f"RayRuntime(max_restarts=...) takes an int >= -1, got {max_restarts!r}"
            )
        try:
            import ray
        except ImportError:
            raise UserError("RayRuntime needs Ray: pip install 'actors[ray]'") from None
        config = HostConfig(
            limits=limits or TreeLimits(),
            workers=workers,
            max_tool_threads=max_tool_threads,
            default_model=default_model,
            placement=placement,
            tool_context_factory=tool_context_factory,
            idle_after=idle_after,
        )
        check_travels(default_model, "default_model", _SPEC_HINT)
        check_travels(
            tool_context_factory, "tool_context_factory", "use a function defined at module level"
        )
        self._recipes: dict[int, tuple[StoreLike, StoreRecipe]] = {}
        self._default_store = store
        self._opened: dict[int, SessionStore] = {}  # stores made by factories, for the driver
        self._checked: weakref.WeakSet[Agent[Any]] = weakref.WeakSet()  # specs that pickle
        if store is not None:
            self._recipe(store)
        self._owns_ray = False
        if not ray.is_initialized():
            # None starts a cluster of its own ("local"): Ray would otherwise join any cluster
            # it finds recorded on the machine, a stale one included.
            ray.init(address=address or "local", include_dashboard=False, log_to_driver=True)
            self._owns_ray = True
        self._closed = False
        self._lock = threading.Lock()
        self._opening = KeyedLock()  # one open_session/restore at a time per session id
        self._counters: dict[str, int] = {}
        self._next_host = 0
        namespace = f"actors-{uuid.uuid4().hex[:12]}"
        names = tuple(f"host-{index}" for index in range(hosts))
        options: dict[str, Any] = {
            "num_cpus": 0,
            "scheduling_strategy": "SPREAD",
            **dict(host_options or {}),
            "namespace": namespace,
            "max_restarts": max_restarts,
            "max_task_retries": 0,  # a call in flight when its host dies fails: never re-run
            "max_concurrency": 100_000,  # waiting runs and pulls are awaits, not threads
        }
        actor_class = ray.remote(AgentHostActor)
        handles: list[Any] = [
            actor_class.options(name=name, **options).remote(index, names, namespace, config)
            for index, name in enumerate(names)
        ]
        self._client = RayClient(handles)
        self.namespace = namespace
        _shut_down_at_exit(self)
        try:
            wait_for([handle.ready.remote() for handle in handles], timeout=120)
        except BaseException:
            self.shutdown()
            raise

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> RayRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every agent (they keep their stored status), then the hosts.

        Stops the Ray of this process too if this runtime started it.
        """
        import ray

        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN.discard(self)
        self._client.closed = True  # refs refuse at once: their hosts are going away
        handles = self._client.handles
        if not ray.is_initialized():  # the driver is gone already: its hosts went with it
            self._client.close()
            return
        with contextlib.suppress(Exception):  # a host that is gone has nothing to stop
            ray.wait(
                [handle.shutdown.remote(timeout) for handle in handles],
                num_returns=len(handles),
                timeout=timeout + 5,
            )
        for handle in handles:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(handle, no_restart=True)
        self._client.close()
        for store in self._opened.values():  # made here by a store factory
            with contextlib.suppress(Exception):
                store.close()
        if self._owns_ray:
            ray.shutdown()

    @property
    def hosts(self) -> int:
        """How many agent hosts this runtime has."""
        return len(self._client.handles)

    def host_handles(self) -> list[Any]:
        """The Ray actor handles of the hosts, by index (to watch or kill them in tests)."""
        return list(self._client.handles)

    # -- agents ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UserError("this runtime is shut down; create a new RayRuntime")

    def _recipe(self, store: StoreLike) -> StoreRecipe:
        known = self._recipes.get(id(store))
        if known is not None and known[0] is store:
            return known[1]
        recipe = StoreRecipe.of(store)
        self._recipes[id(store)] = (store, recipe)
        return recipe

    def _store(self, store: StoreLike | None) -> StoreLike | None:
        return store if store is not None else self._default_store

    def _unique_id(self, wanted: str, explicit: bool) -> str:
        client = self._client
        with self._lock, client.lock:
            suffix = self._counters.get(wanted)
            if (explicit or suffix is None) and wanted not in client.roots:
                if suffix is None and not explicit:
                    self._counters[wanted] = 2
                return wanted
            if explicit:
                raise UserError(f"agent id {wanted!r} is taken in this runtime")
            suffix = suffix or 2
            while f"{wanted}-{suffix}" in client.roots:
                suffix += 1
            self._counters[wanted] = suffix + 1
            return f"{wanted}-{suffix}"

    def _check_spec(self, agent: Agent[Any]) -> None:
        """That a spec pickles, checked once per spec (a spec is immutable)."""
        if agent not in self._checked:
            check_travels(agent, f"agent {agent.name!r}", _SPEC_HINT)
            self._checked.add(agent)

    def _live_root(self, session_id: str, recipe: StoreRecipe) -> Root | None:
        """The root of the session of this store, if it is live in this runtime."""
        with self._client.lock:
            for root in self._client.roots.values():
                if root.session_id == session_id and root.seed.store == recipe:
                    return root
        return None

    def _seed(
        self,
        agent: Agent[Any],
        store: StoreLike | None,
        session_id: str | None,
        tool_context: Any,
        approval_handler: ApprovalHandler | None,
    ) -> TreeSeed:
        self._check_spec(agent)
        check_travels(tool_context, "tool_context", _TOOL_CONTEXT_HINT)
        check_travels(approval_handler, "approval_handler", "use a module-level function")
        recipe = self._recipe(store) if store is not None else None
        return TreeSeed(recipe, session_id, tool_context, approval_handler)

    def _ref(
        self, info: RootInfo, host: int, seed: TreeSeed, specs: Sequence[Agent[Any]]
    ) -> AgentRef:
        root = Root(
            info.agent_id,
            info.name,
            host,
            info.session_id,
            TreeSeed(seed.store, info.session_id, seed.tool_context, seed.approval_handler),
            tuple(specs),
        )
        with self._client.lock:
            self._client.roots[info.agent_id] = root
        return AgentRef._new(
            self._client, info.agent_id, name=info.name, session_id=info.session_id
        )

    def spawn(
        self,
        agent: Agent[OutputT],
        *,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        store: StoreLike | None = None,
        session_id: str | None = None,
        approval_handler: ApprovalHandler | None = None,
        budget: Budget | None = None,
    ) -> AgentRef[OutputT]:
        """Start a root agent on one of the hosts (round-robin) and return a handle to it.

        Arguments as for `Runtime.spawn`; ``store`` defaults to the runtime's. The spec, the
        ``tool_context`` and the approval handler are pickled to the host. A ``budget`` holds
        on every host of the tree only when it is shared (``Budget(shared=...)``, kept in
        the store); otherwise it covers the agents on the root's host.

        Raises:
            UserError: the runtime is shut down, bad metadata, an id taken, a session that
                holds this agent already.
            WireError: the spec, the ``tool_context`` or the approval handler cannot travel.
        """
        self._check_open()
        if not isinstance(agent, Agent):
            raise UserError(f"spawn takes an Agent spec, got {type(agent).__name__}")
        initial = plain_metadata(metadata)
        seed = self._seed(agent, self._store(store), session_id, tool_context, approval_handler)
        chosen = self._unique_id(agent_id or agent.name, agent_id is not None)
        with self._lock:
            host = self._next_host % self.hosts
            self._next_host += 1
        handle = self._client.handles[host]
        checked = check_budget(budget)
        info = wait_for(handle.spawn.remote(chosen, agent, seed, initial, checked)).get()
        ref: AgentRef[OutputT] = self._ref(info, host, seed, [agent])
        return ref

    def _session_host(self, session_id: str) -> int:
        return zlib.crc32(session_id.encode()) % self.hosts

    def open_session(
        self,
        agent: Agent[OutputT],
        *,
        session_id: str,
        store: StoreLike | None = None,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef[OutputT]:
        """The root agent of a session: live already, restored from the store, or new.

        As `Runtime.open_session`; a session always lives on the same host (by its id).
        """
        self._check_open()
        if not isinstance(session_id, str) or not session_id:
            raise UserError(f"open_session needs a non-empty session_id, got {session_id!r}")
        chosen_store = self._store(store)
        if chosen_store is None:
            raise UserError("open_session needs a store: pass store=... here or to RayRuntime")
        recipe = self._recipe(chosen_store)
        known = self._session_ref(agent, session_id, recipe)  # the usual case: no lock taken
        if known is not None:
            return known
        with self._opening.hold(session_id):  # callers of one session take turns
            known = self._session_ref(agent, session_id, recipe)
            if known is not None:
                return known
            seed = self._seed(agent, chosen_store, session_id, tool_context, approval_handler)
            host = self._session_host(session_id)
            handle = self._client.handles[host]
            if has_session(self._driver_store(chosen_store), session_id):
                info = wait_for(handle.restore.remote(session_id, [agent], seed)).get()
            else:
                initial = plain_metadata(metadata)
                chosen = self._unique_id(session_id, explicit=True)
                info = wait_for(handle.spawn.remote(chosen, agent, seed, initial)).get()
            ref: AgentRef[OutputT] = self._ref(info, host, seed, [agent])
            return ref

    def _session_ref(
        self, agent: Agent[OutputT], session_id: str, recipe: StoreRecipe
    ) -> AgentRef[OutputT] | None:
        """The root of the session if it is live in this runtime, checked against ``agent``."""
        live = self._live_root(session_id, recipe)
        if live is None:
            return None
        if live.name != agent.name:
            raise AgentDefinitionError(
                f"session {session_id!r} is run by an agent of spec {live.name!r}, not "
                f"{agent.name!r}; open it with that spec (specs are matched by name)"
            )
        return AgentRef._new(self._client, live.agent_id, name=live.name, session_id=session_id)

    def _driver_store(self, store: StoreLike) -> SessionStore:
        if isinstance(store, SessionStore):
            return store
        with self._lock:  # two threads opening sessions make one store of a factory
            opened = self._opened.get(id(store))
            if opened is None:
                opened = self._opened[id(store)] = store()
        return opened

    def restore(
        self,
        session_id: str,
        *,
        store: StoreLike | None = None,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        tool_context: Any = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> AgentRef:
        """Rebuild a stored tree on the session's host and return a handle on its root.

        As `Runtime.restore`: interrupted turns are closed, open requests survive.

        Raises:
            SessionNotFoundError: no such session in the store.
            AgentDefinitionError: a spec of an agent that comes back was not given.
            UserError: the session is live in this runtime already.
        """
        self._check_open()
        chosen_store = self._store(store)
        if chosen_store is None:
            raise UserError("restore needs a store: pass store=... here or to RayRuntime")
        specs = list(agents.values()) if isinstance(agents, Mapping) else list(agents)
        if not specs:
            raise UserError("restore needs the specs of the session's agents: agents=[...]")
        with self._opening.hold(session_id):  # not while open_session opens it
            live = self._live_root(session_id, self._recipe(chosen_store))
            if live is not None:
                raise UserError(
                    f"session {session_id!r} is already live in this runtime ({live.agent_id!r})"
                )
            seed = self._seed(specs[0], chosen_store, session_id, tool_context, approval_handler)
            for spec in specs[1:]:
                self._check_spec(spec)
            host = self._session_host(session_id)
            handle = self._client.handles[host]
            info = wait_for(handle.restore.remote(session_id, specs, seed)).get()
            return self._ref(info, host, seed, specs)

    def ref(self, agent_id: str) -> AgentRef:
        """The handle of any agent of this runtime by id (a root, or a child on any host).

        Raises:
            UserError: no host holds an agent of that id.
        """
        client = self._client
        with client.lock:
            root = client.roots.get(agent_id)
        if root is not None:
            return AgentRef._new(client, agent_id, name=root.name, session_id=root.session_id)
        found = wait_for([h.holds.remote(agent_id) for h in client.handles])
        for host, info in enumerate(found):
            if info is not None:
                with client.lock:
                    client.where[agent_id] = host
                return AgentRef._new(
                    client,
                    agent_id,
                    name=info["name"],
                    parent_id=info["parent_id"],
                    session_id=info["session_id"],
                )
        raise UserError(f"no agent {agent_id!r} in this runtime")

    def host_of(self, agent_id: str) -> int:
        """The index of the host a root agent (or an agent found by `ref`) lives on.

        Raises:
            AgentStoppedError: this runtime knows no such agent.
        """
        return self._client.host_of(agent_id)

    def live_agents(self) -> int:
        """How many agents run on the hosts together (a host restarting is waited for)."""
        return sum(self.live_agents_by_host())

    def live_agents_by_host(self) -> list[int]:
        """How many agents run on each host, by host index (a host restarting is waited for).

        Raises:
            HostLostError: a host did not come back within 30 s.
        """
        deadline = time.monotonic() + RESTART_WAIT
        while True:
            try:
                counts = wait_for([h.live_agents.remote() for h in self._client.handles])
                return [int(c) for c in counts]
            except HostLostError:  # Ray answers at once that a restarting host is unavailable
                if time.monotonic() > deadline:
                    raise
                time.sleep(RESEND_DELAY)  # nothing to wait on but the restart
