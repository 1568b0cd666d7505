"""`HostServer`: what one agent host does, apart from being a Ray actor.

It runs an in-process `LocalHost` (pooled mailboxes, an asyncio loop for model calls, a tool
pool) for the agents of this host, with `HostPeers` as its `Peers`: children placed on other
hosts, and answers to parents that live elsewhere. It opens each store once, turns a tree's
``tool_context`` into this host's (``tool_context_factory``), and holds the outboxes the driver
pulls stream and subscription events from.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actors._logging import get_logger
from actors.context._agent_context import AgentContext
from actors.context._events import system_clock
from actors.exceptions import AgentStoppedError, HostLostError
from actors.host import AgentNode, StreamEvent, Tree, TreeNode, restore_tree
from actors.loop._agent import Agent
from actors.loop._budget import Budget, ledger_for
from actors.loop._loop import TreeLimits
from actors.models._model import Model
from actors.ray._inputs import Adopt
from actors.ray._lost import close_lost
from actors.ray._outbox import Outbox
from actors.ray._peers import HostPeers
from actors.ray._remote_child import RemoteChild
from actors.ray._wire import Missing, Outcome, RootInfo, StoreRecipe, TreeSeed
from actors.runtime import LocalHost
from actors.store._fences import fence
from actors.store._protocol import SessionStore

__all__ = ["HostConfig", "HostServer"]

_log = get_logger("actors.ray")


RUNS_REMEMBERED = 65_536  # run keys a host keeps to refuse starting one twice


@dataclass(frozen=True, slots=True)
class HostConfig:
    """How every agent host of a `RayRuntime` is set up (it travels to each host).

    Attributes:
        limits: Tree limits.
        workers: Mailbox worker threads per host.
        max_tool_threads: Threads for blocking tools per host.
        default_model: The model of specs that name none.
        placement: Where children go whose `Subagent` names no placement.
        tool_context_factory: Turns a tree's ``tool_context`` into the object its tools see on
            this host, or None to use it as it arrived.
        idle_after: Seconds after which an idle tree with a store is passivated (put to sleep
            in its store, nothing in memory), or None to keep agents in memory.
    """

    limits: TreeLimits
    workers: int
    max_tool_threads: int
    default_model: Model | None
    placement: str
    tool_context_factory: Callable[[Any], Any] | None
    idle_after: float | None = None


class HostServer:
    """One agent host's agents, stores and outboxes.

    Args:
        index: This host's index among the runtime's hosts.
        names: The Ray actor names of all hosts.
        namespace: Their Ray namespace.
        config: The runtime's host configuration.
    """

    def __init__(
        self, index: int, names: tuple[str, ...], namespace: str, config: HostConfig
    ) -> None:
        self.index = index
        self.config = config
        self.peers = HostPeers(self, names, namespace, config.placement)
        self.local = LocalHost(
            limits=config.limits,
            workers=config.workers,
            max_tool_threads=config.max_tool_threads,
            clock=system_clock,
            idle_after=config.idle_after,
            default_model=config.default_model,
            peers=self.peers,
        )
        # The hosts of a runtime write a session together (a spread child's host writes its
        # own agents' logs): none of them holds it alone (`SessionStore.acquire`).
        self.local.exclusive = False
        self._lock = threading.Lock()
        self._stores: dict[str, SessionStore] = {}
        self.seeds: dict[str, TreeSeed] = {}  # by the id of the root of a tree on this host
        self._contexts: dict[str, Any] = {}  # what the tools of each such tree see here
        self.parent_hosts: dict[str, int] = {}  # adopted child id -> its parent's host
        self.outboxes: dict[str, Outbox] = {}
        # Keys of the latest runs started here: a lane's call sent twice (its answer was lost
        # to a network blip, not its host) must not start a run twice.
        self._runs_started: OrderedDict[str, None] = OrderedDict()
        # By agent restored here: the keys of the runs its log says were started (by a host
        # that died). Such a run, sent again, is refused: it would start twice.
        self._logged_runs: dict[str, set[str]] = {}
        self._unsubscribe: dict[str, Callable[[], None]] = {}
        self.closing = False  # shutting down: children stay here, stand-ins are let go
        # Ray restarted this host: agents it does not hold may come back (their sessions are
        # restored when the driver next calls them), so a peer message to one is sent again.
        self.restarted = False

    # -- trees --------------------------------------------------------------------------------

    def store_of(self, recipe: StoreRecipe | None) -> SessionStore | None:
        """This host's instance of a store (opened once)."""
        if recipe is None:
            return None
        with self._lock:
            store = self._stores.get(recipe.key)
            if store is None:
                store = self._stores[recipe.key] = recipe.open()
            return store

    def tool_context(self, seed: TreeSeed) -> Any:
        """What the tools of a tree that arrived here see as ``tool_context``."""
        factory = self.config.tool_context_factory
        if factory is None or seed.narrowed:
            return seed.tool_context
        return factory(seed.tool_context)

    def seed_of(self, tree: Tree) -> TreeSeed:
        """The seed of a tree of this host (for a child it sends elsewhere)."""
        seed = self.seeds.get(tree.root_id)
        assert seed is not None, f"no seed for tree {tree.root_id!r}"
        return seed

    def context_of(self, tree: Tree) -> Any:
        """The ``tool_context`` this host built for a tree.

        A child whose ``tool_context`` is another object was narrowed by its `Subagent`.
        """
        return self._contexts.get(tree.root_id)

    def _remember(self, root_id: str, seed: TreeSeed, context: Any) -> None:
        with self._lock:
            self.seeds[root_id] = seed
            self._contexts[root_id] = context
            if len(self.seeds) > 64 and len(self.seeds) > 2 * len(self.local.nodes):
                with self.local.lock:
                    alive = set(self.local.nodes)
                for key in [k for k in self.seeds if k not in alive and k != root_id]:
                    del self.seeds[key]
                    self._contexts.pop(key, None)
                for key in [k for k in self.parent_hosts if k not in alive]:
                    del self.parent_hosts[key]
                for key in [k for k in self._logged_runs if k not in alive]:
                    del self._logged_runs[key]

    def spawn(
        self,
        agent_id: str,
        spec: Agent[Any],
        seed: TreeSeed,
        metadata: dict[str, Any],
        budget: Budget | None = None,
    ) -> RootInfo:
        """Start a root agent under the id the driver chose."""
        local = self.local
        local.reserve(agent_id)
        context = self.tool_context(seed)
        node = local.spawn_root(
            spec,
            agent_id=agent_id,
            tool_context=context,
            metadata=metadata,
            store=self.store_of(seed.store),
            session_id=seed.session_id,
            approval_handler=seed.approval_handler,
            budget=budget,
        )
        self._remember(agent_id, dataclasses.replace(seed, session_id=node.session_id), context)
        self._fence(node.tree.store, node.session_id, [agent_id])
        return RootInfo(agent_id, node.name, node.session_id)

    def restore(self, session_id: str, specs: Sequence[Agent[Any]], seed: TreeSeed) -> RootInfo:
        """Rebuild a stored tree here (see `Runtime.restore`)."""
        store = self.store_of(seed.store)
        assert store is not None
        # This host takes the whole tree over: a host that ran any of it before (one that
        # died, or seems to) can write none of it from now on, nor start a run of it.
        self._fence(store, session_id, None)
        context = self.tool_context(seed)
        node = restore_tree(
            self.local,
            session_id,
            store=store,
            agents=list(specs),
            tool_context=context,
            approval_handler=seed.approval_handler,
        )
        self._remember(node.agent_id, seed, context)
        self._note_started(node)
        return RootInfo(node.agent_id, node.name, session_id)

    def _note_started(self, root: AgentNode) -> None:
        """Remember the keys of the runs a restored tree's logs say were started."""
        with self.local.lock:
            cells = [
                (agent_id, cell)
                for agent_id, cell in self.local.cells.items()
                if cell.node.tree is root.tree
            ]
        for agent_id, cell in cells:
            keys = {
                event.data["key"]
                for event in list(cell.loop.ctx.events)
                if event.type == "turn_start" and "key" in event.data
            }
            if keys:
                with self._lock:
                    self._logged_runs[agent_id] = keys

    def started_before(self, agent_id: str, run: str) -> bool:
        """Whether the agent's log, as restored here, holds the start of the run ``run``."""
        with self._lock:
            return bool(run) and run in self._logged_runs.get(agent_id, ())

    @staticmethod
    def _fence(store: SessionStore | None, session_id: str | None, ids: list[str] | None) -> None:
        """Make this host the only writer of agents of a session (`actors.store._fences`)."""
        if store is not None and session_id is not None:
            epoch = fence(store, session_id, ids)
            _log.debug("agents fenced", session_id=session_id, agents=ids, epoch=epoch)

    def adopt(self, child_id: str, adopt: Adopt) -> None:
        """Start a child whose parent lives on another host (its first events are stored)."""
        seed = adopt.seed
        tree = Tree(
            child_id,
            store=self.store_of(seed.store),
            session_id=seed.session_id,
            approval_handler=seed.approval_handler,
        )
        tree.next_position(after=adopt.position)  # its descendants come after it
        self._fence(tree.store, seed.session_id, [child_id])  # its log is this host's now
        context = AgentContext.deserialize(adopt.context, clock=self.local.clock)
        if tree.store is not None and seed.session_id is not None:
            stored = tree.store.last_seq(seed.session_id, child_id)
            if stored >= context.event_count:
                # Its log goes on past what its parent sent: a host adopted it before and
                # died during its run (this is the same call, sent again). It starts once.
                raise HostLostError(
                    f"subagent {child_id!r} was started already, on a host that died during "
                    "its run; it is not started twice",
                    agent_id=child_id,
                )
        context.max_iterations = adopt.spec.max_iterations
        node = AgentNode(
            child_id,
            adopt.spec.name,
            adopt.path[-2],
            adopt.depth,
            adopt.spec,
            self.tool_context(seed),
            tree,
            path=adopt.path,
            position=adopt.position,
            saved_status="idle",
        )
        outer = None
        for budget in adopt.budgets:  # shared: kept in the store, so they hold here too
            outer = ledger_for(outer, budget, tree.store)
        node.ledger = ledger_for(outer, adopt.spec.budget, tree.store)
        loop = self.local.new_loop(node, context)
        self._remember(child_id, seed, node.tool_context)
        self.parent_hosts[child_id] = adopt.parent_host
        self.local.reserve(child_id)
        self.local.start(node, loop)

    # -- what the driver asks --------------------------------------------------------------------

    def holds(self, agent_id: str) -> bool:
        """Whether an agent of this id lives on this host (not as a stand-in), or sleeps here.

        A passivated agent counts: a message to it wakes it here, from its store.
        """
        with self.local.lock:
            if agent_id in self.local.cells:
                return True
        return self.local.virtual.dormant(agent_id) is not None

    def status(self, agent_id: str) -> Outcome | Missing:
        """An agent's status (a passivated one's as it was put to sleep)."""
        if not self.holds(agent_id):
            return Missing(agent_id)
        return Outcome(self.local.status_of(agent_id))

    def passivate(self, agent_id: str, timeout: float) -> bool:
        """Put the tree of ``agent_id`` to sleep in its store now, if it is idle."""
        return self.local.virtual.passivate(agent_id, timeout)

    def tree(self, agent_id: str) -> tuple[TreeNode, dict[str, int]] | Missing:
        """The tree under an agent, and which of its nodes are children on other hosts."""
        if not self.holds(agent_id):
            return Missing(agent_id)
        view = self.local.tree_of(agent_id)
        remote: dict[str, int] = {}
        with self.local.lock:
            for item in view.walk():
                node = self.local.nodes.get(item.agent_id)
                if node is not None and isinstance(node.ref, RemoteChild):
                    remote[item.agent_id] = node.ref.host
        return view, remote

    def stop(self, agent_id: str) -> None:
        """Stop an agent and its descendants."""
        self.local.stop_agent(agent_id)

    def forget(self, session_id: str, under: str | None) -> int:
        """Stop this host's agents of a session (under one agent), whose tree lost its host."""
        with self.local.lock:
            doomed = [
                node
                for node in self.local.nodes.values()
                if node.tree.session_id == session_id
                and (under is None or under in node.path)
                and node.parent_id not in self.local.nodes
            ]
        for node in doomed:
            self.local.stop_subtree(node, block=True)
        return len(doomed)

    def recover_lost(self, node: AgentNode, then: Callable[[], None]) -> None:
        """A child's host died: close its subtree's interrupted runs in the store, then ``then``.

        Runs on its own thread: first every other host stops what it still runs of that
        subtree (spread grandchildren, whose results have nowhere to go), then the logs are
        fenced and recovered as a restore recovers them, and the peer messages they hold as
        sent are sent again (the host that died may not have delivered them).
        """
        store, session_id = node.tree.store, node.tree.session_id
        # The child's own host died (or refused to start it twice): it holds nothing of the
        # subtree, and asking it would wait for its restart.
        lost_host = node.ref.host if isinstance(node.ref, RemoteChild) else None

        def work() -> None:
            import ray

            try:
                if store is not None and session_id is not None:
                    calls = [
                        self.peers.call(i, "forget", session_id, node.agent_id)
                        for i in range(len(self.peers.names))
                        if i not in (self.index, lost_host)
                    ]
                    if calls:
                        ray.wait(calls, num_returns=len(calls), timeout=30)
                    for sender, send in close_lost(store, session_id, node.agent_id):
                        self.local.deliver_peer(sender, send)
            except Exception:
                _log.exception("could not close a lost subtree", agent_id=node.agent_id)
            finally:
                then()

        threading.Thread(target=work, name="actors-ray-recover", daemon=True).start()

    # -- streams and subscriptions --------------------------------------------------------------

    def first_start(self, key: str) -> bool:
        """Whether the run of ``key`` is started here for the first time (and note that it is)."""
        with self._lock:
            if key in self._runs_started:
                return False
            self._runs_started[key] = None
            if len(self._runs_started) > RUNS_REMEMBERED:
                self._runs_started.popitem(last=False)
            return True

    def outbox(self, key: str) -> Outbox:
        """The outbox of ``key`` (made on first use by either side)."""
        with self._lock:
            box = self.outboxes.get(key)
            if box is None:
                box = self.outboxes[key] = Outbox()
            return box

    def drop_outbox(self, key: str) -> None:
        """Forget an outbox nobody reads any more (its pull was cancelled)."""
        with self._lock:
            self.outboxes.pop(key, None)

    def take(self, key: str) -> tuple[list[Any], concurrent.futures.Future[None] | None]:
        """What an outbox holds, or a future set when it holds something."""
        box = self.outbox(key)
        items, waiter = box.take()
        if items and box.finished:
            with self._lock:
                self.outboxes.pop(key, None)
        return items, waiter

    def subscribe(self, agent_id: str, key: str) -> Outcome | Missing:
        """Send an agent's events to the outbox ``key``."""
        box = self.outbox(key)
        try:
            self._unsubscribe[key] = self.local.subscribe(agent_id, box.put)
        except AgentStoppedError:
            # Its caller activates the agent and subscribes again under the same key: a closed
            # outbox left here would end that subscription before its first event.
            self.drop_outbox(key)
            return Missing(agent_id)
        return Outcome()

    def unsubscribe(self, key: str) -> None:
        """End a subscription."""
        stop = self._unsubscribe.pop(key, None)
        if stop is not None:
            stop()
        self.outbox(key).close()

    def stream_in(self, parent_id: str, events: Sequence[StreamEvent]) -> None:
        """Stream events of a remote child, for the streams open on its parent's tree here."""
        if not events:
            return
        with self.local.lock:
            parent = self.local.nodes.get(parent_id)
        if parent is None:
            return
        for scope, stream in parent.tree.streams:
            for event in events:
                if scope in event.path:
                    stream.put(event)

    # -- the host -------------------------------------------------------------------------------

    def live_agents(self) -> int:
        """Agents running on this host (stand-ins of children elsewhere not counted)."""
        with self.local.lock:
            return len(self.local.cells)

    def shutdown(self, timeout: float) -> None:
        """Stop every agent (they keep their stored status), then close the stores.

        The stand-ins of children on other hosts go first: they are no actors of this host to
        stop, and each child is left to its own host's shutdown.
        """
        self.closing = True
        self.peers.mail.close()
        with self.local.lock:
            stand_ins = [n.ref for n in self.local.nodes.values() if isinstance(n.ref, RemoteChild)]
        for stand_in in stand_ins:
            stand_in.stop(block=False)
        self.local.shutdown(timeout)
        for box in list(self.outboxes.values()):
            box.close()
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            try:
                store.close()
            except Exception:
                _log.exception("could not close a store")
