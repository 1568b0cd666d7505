"""The host's record of one agent of a tree, and what the agents of one tree share."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors._logging import get_logger
from actors.context._agent_context import AgentContext
from actors.context._event_log import consumers_changed, publishing
from actors.context._events import Clock, Event
from actors.context._frozen import thaw
from actors.host._observer import installed, notify_event
from actors.host._stream import SubagentFinished, TreeStream, to_stream_events
from actors.host._tombstone import Tombstone, TreeNode
from actors.loop._agent import Agent
from actors.loop._budget import Budget, Ledger, ledger_for
from actors.loop._loop import AgentLoop, TreeLimits
from actors.models._model import StreamDelta

if TYPE_CHECKING:
    from actors.host._approval import ApprovalHandler
    from actors.loop._toolset_host import ToolsetHost
    from actors.loop._types import Finish
    from actors.models._model import Model
    from actors.store._protocol import SessionStore

__all__ = ["MAX_ENDED", "AgentNode", "Tree", "answered", "new_child", "new_loop", "new_root"]

_log = get_logger("actors.runtime")

_trees = itertools.count(1)

MAX_ENDED = 1000
"""How many ended agents a tree remembers for its tree view (a long-lived root that spawns
children forever must not hold them all)."""


class Tree:
    """What the agents of one tree share: the store, the live count, the open streams.

    Args:
        root_id: The root agent's id.
        store: Where the tree's events persist, or None.
        session_id: The session in the store.
        approval_handler: The in-process approval handler of the tree, or None.
    """

    __slots__ = (
        "_positions",
        "approval_handler",
        "ended",
        "incarnation",
        "last_active",
        "live",
        "lock",
        "observed",
        "root_id",
        "session_id",
        "store",
        "streams",
    )

    def __init__(
        self,
        root_id: str,
        *,
        store: SessionStore | None = None,
        session_id: str | None = None,
        approval_handler: ApprovalHandler | None = None,
    ) -> None:
        self.root_id = root_id
        self.store = store
        self.session_id = session_id
        self.approval_handler = approval_handler
        self.live = 0  # agents of the tree with a live actor (guarded by the host's lock)
        self.lock = threading.Lock()
        self.streams: tuple[tuple[str, TreeStream], ...] = ()  # (scope agent id, stream)
        self._positions = itertools.count(1)
        self.last_active = 0.0  # monotonic time an agent of the tree last handled a message
        # Which life of the agents this is: refs made before a stop never reach an agent that
        # took the same id later (a session keeps its identity across passivation).
        self.incarnation = session_id or f"tree-{next(_trees)}"
        self.ended: dict[str, Tombstone] = {}  # the agents of the tree that ended, latest last
        self.observed: Any = None  # what the tree observer keeps for this tree (its spans)

    def remember(self, tombstone: Tombstone) -> None:
        """Keep how an agent of the tree ended (for tree views), the latest `MAX_ENDED` only."""
        with self.lock:
            self.ended.pop(tombstone.agent_id, None)
            self.ended[tombstone.agent_id] = tombstone
            while len(self.ended) > MAX_ENDED:
                del self.ended[next(iter(self.ended))]

    def next_position(self, after: int | None = None) -> int:
        """The spawn position of the next agent of the tree (after ``after``, if given)."""
        if after is not None:
            self._positions = itertools.count(after + 1)
        return next(self._positions)

    def open_stream(self, scope: str, stream: TreeStream) -> Callable[[], None]:
        """Send the events of ``scope`` and its descendants to ``stream``; returns a closer."""
        entry = (scope, stream)
        with self.lock:
            self.streams = (*self.streams, entry)
        consumers_changed()

        def close() -> None:
            with self.lock:
                self.streams = tuple(s for s in self.streams if s is not entry)
            consumers_changed()

        return close

    def __repr__(self) -> str:
        return f"<Tree {self.root_id!r} session={self.session_id!r}>"


@dataclass(eq=False, slots=True)
class AgentNode:
    """The host's record of one agent, live or finished (what ``ref.tree()`` reads).

    Its repr never shows ``tool_context`` (it may hold secrets).
    """

    agent_id: str
    name: str
    parent_id: str | None
    depth: int
    spec: Agent[Any]
    tool_context: Any = field(repr=False)
    tree: Tree
    path: tuple[str, ...] = ()
    ref: Any = field(default=None, repr=False)  # the live actor's pykka ref, or None
    status: str = "idle"
    step: int = 0
    tool: str | None = None
    keep: bool = False
    children: list[str] = field(default_factory=list, repr=False)
    listeners: list[Callable[[Event], None]] = field(default_factory=list, repr=False)
    position: int = 0
    buffer: list[Event] = field(default_factory=list, repr=False)
    saved_status: str | None = None
    counted: bool = False  # counted among its tree's live agents
    run_timeout: float | None = None  # its parent's deadline for each of its runs
    # Whether its events go anywhere (`on_append`), decided at `publishing`'s value `epoch`.
    epoch: int = field(default=-1, repr=False)
    wants: bool = field(default=False, repr=False)
    # Children whose end was streamed when it came (`announce_child_end`): their
    # `subagent_finished` event, logged later in call order, is not streamed again.
    announced: set[str] | None = field(default=None, repr=False)
    # The seq of the last event its store's snapshot folded (-1: none that fits the log).
    snapshot_seq: int = field(default=-1, repr=False)
    # The ledger its requests reserve against: its tree's budget, or its own inside it.
    ledger: Ledger | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.path:
            self.path = (self.agent_id,)

    @property
    def root_id(self) -> str:
        """The id of the tree's root."""
        return self.tree.root_id

    @property
    def store(self) -> SessionStore | None:
        """The tree's store."""
        return self.tree.store

    @property
    def session_id(self) -> str | None:
        """The tree's session."""
        return self.tree.session_id

    @property
    def approval_handler(self) -> ApprovalHandler | None:
        """The tree's in-process approval handler."""
        return self.tree.approval_handler

    def on_append(self, context: AgentContext, seq: int) -> None:
        """The agent's context appended event ``seq``: publish it if anything takes events.

        Nothing does in most agents of a simulation (no store, subscriber, stream or tracer):
        then the event stays a record in the log (see `actors.context._event_log`), and the
        context stops calling here until a subscriber, a stream or a tracer comes.
        """
        epoch = publishing.value
        if self.epoch != epoch:
            tree = self.tree
            self.wants = bool(
                tree.store is not None
                or self.listeners
                or tree.streams
                or installed.observer is not None
            )
            self.epoch = epoch
        if self.wants:
            self.publish_event(context._event_at(seq))

    def publish_event(self, event: Event) -> None:
        """An event was appended: buffer it for the store, show it to listeners and streams."""
        tree = self.tree
        if tree.store is not None:
            self.buffer.append(event)
        if self.listeners:  # most agents have none: no copy to make per event
            for listener in tuple(self.listeners):
                try:
                    listener(event)
                except Exception:  # a broken listener must not break the agent
                    _log.exception("event listener failed", agent_id=self.agent_id)
        shown = self.announced is not None and self._forget_announced(event)
        if tree.streams and not shown:
            self._stream(event)
        if installed.observer is not None:
            notify_event(self, event)

    def announce_child_end(self, child_id: str, status: str) -> None:
        """Stream that a child of this agent ended, now rather than when the step ends.

        Its ``subagent_finished`` event is logged once every call of the step has finished,
        in call order (so the log does not depend on which child finished first); a stream
        shows the end when it happens, and that event is then not streamed again.
        """
        targets = [s for scope, s in self.tree.streams if scope in self.path]
        if not targets:
            return
        if self.announced is None:
            self.announced = set()
        self.announced.add(child_id)
        event = SubagentFinished(
            agent_id=self.agent_id, path=self.path, child_id=child_id, status=status
        )
        for stream in targets:
            stream.put(event)

    def forget_announced(self) -> None:
        """The run ended: every announced child's event is logged, or never will be."""
        self.announced = None

    def _forget_announced(self, event: Event) -> bool:
        # Whether ``event`` is the logged end of a child whose end was streamed already.
        announced = self.announced
        if announced is None or event.type != "subagent_finished":
            return False
        child_id = event.data.get("child_id")
        if child_id not in announced:
            return False
        announced.discard(child_id)
        if not announced:
            self.announced = None
        return True

    def publish_delta(self, delta: StreamDelta) -> None:
        """A piece of a streamed reply: streams only (deltas are never stored)."""
        if self.tree.streams:
            self._stream(delta)

    def _stream(self, item: Event | StreamDelta) -> None:
        targets = [s for scope, s in self.tree.streams if scope in self.path]
        if not targets:
            return
        try:
            events = to_stream_events(self.agent_id, self.path, item)
        except Exception:  # an event the stream cannot show must not break the agent
            _log.exception("could not stream an event", agent_id=self.agent_id)
            return
        for stream in targets:
            for event in events:
                stream.put(event)

    def wants_deltas(self) -> bool:
        """Whether a stream open on this agent or an ancestor wants its model's pieces."""
        return any(scope in self.path for scope, _ in self.tree.streams)

    def view(self, children: tuple[TreeNode, ...]) -> TreeNode:
        """This agent as ``ref.tree()`` shows it, over the views of its children."""
        return TreeNode(
            self.agent_id, self.name, self.parent_id, self.status, self.step, self.tool, children
        )

    @property
    def alive(self) -> bool:
        """Whether the agent has a live actor."""
        return self.ref is not None and self.ref.is_alive()


def answered(node: AgentNode, effect: Finish) -> bool:
    """A child answered its parent with ``effect``: set its status; whether it now stops.

    A child that waits on a request stays as it is; a kept one goes back to idle; any other
    ends (finished, cancelled or failed) and stops.
    """
    if effect.result is not None and effect.result.status == "suspended":
        return False
    if node.keep:  # alive, waiting for its parent's next task
        node.status = "idle"
        return False
    if effect.error is None and effect.result is not None:
        node.status = "finished" if effect.result.status == "completed" else "cancelled"
    else:
        node.status = "failed"
    return True


def new_loop(
    node: AgentNode,
    context: AgentContext,
    model: Model,
    *,
    limits: TreeLimits,
    toolsets: ToolsetHost | None,
    peer_exists: Callable[[str], bool],
) -> AgentLoop:
    """The state machine of an agent of ``node``, around its context (fresh or restored)."""
    return AgentLoop(
        node.spec,
        context,
        model=model,
        tool_context=node.tool_context,
        depth=node.depth,
        limits=limits,
        approval_handler=node.approval_handler is not None,
        toolsets=toolsets,
        peer_exists=peer_exists,
        budget=node.ledger,
    )


def new_root(
    agent_id: str,
    spec: Agent[Any],
    metadata: Mapping[str, Any] | None,
    tool_context: Any,
    clock: Clock,
    *,
    store: SessionStore | None = None,
    approval_handler: ApprovalHandler | None = None,
    budget: Budget | None = None,
) -> tuple[AgentNode, AgentContext]:
    """A root agent's record, its own tree and its fresh context, on any host.

    A ``budget`` given at spawn is logged (``budget_set``), so a restore knows it.
    """
    context = AgentContext(
        agent_id,
        name=spec.name,
        metadata=metadata,
        max_iterations=spec.max_iterations,
        clock=clock,
    )
    if budget is not None:
        context._record("budget_set", {"budget": budget.model_dump(mode="json")})
    tree = Tree(agent_id, store=store, approval_handler=approval_handler)
    node = AgentNode(agent_id, spec.name, None, 0, spec, tool_context, tree)
    node.ledger = ledger_for(ledger_for(None, budget, store), spec.budget, store)
    return node, context


def new_child(
    parent: AgentNode,
    child_id: str,
    spec: Agent[Any],
    metadata: Mapping[str, Any],
    tool_context: Any,
    clock: Clock,
) -> tuple[AgentNode, AgentContext]:
    """A child's record and fresh context, on any host; its first events wait in its buffer.

    The metadata is a deep copy (nothing the child does reaches its parent's); the
    ``tool_context`` is the loop's choice: the parent's own object, or a narrowed one.
    """
    context = AgentContext(
        child_id,
        name=spec.name,
        parent_id=parent.agent_id,
        metadata=thaw(metadata),
        max_iterations=spec.max_iterations,
        clock=clock,
    )
    node = AgentNode(
        child_id,
        spec.name,
        parent.agent_id,
        parent.depth + 1,
        spec,
        tool_context,
        parent.tree,
        path=(*parent.path, child_id),
        position=parent.tree.next_position(),
        ledger=ledger_for(parent.ledger, spec.budget, parent.tree.store),
    )
    node.buffer.extend(context.events)
    return node, context
