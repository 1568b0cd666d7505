"""The tree observer seam: one process-wide watcher of every agent's log (`actors.otel`'s spans).

An observer sees each event as it is appended, on the agent's own turn, on whichever host runs
it; a restored or woken agent's whole log when it comes back; and an agent leaving memory. It
keeps what it needs in ``Tree.observed``, so its state lives and dies with the tree. With no
observer installed an event costs one ``None`` check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from actors._logging import get_logger
from actors.context._event_log import consumers_changed

if TYPE_CHECKING:
    from actors.context._events import Event
    from actors.host._node import AgentNode

__all__ = [
    "installed",
    "TreeObserver",
    "current_observer",
    "notify_event",
    "notify_release",
    "notify_restore",
    "set_tree_observer",
]

_log = get_logger("actors.runtime")


class TreeObserver(Protocol):
    """What a host tells an observer. Each call runs on the agent's turn: keep it quick.

    An exception raised here is logged and never reaches the agent.
    """

    def on_event(self, node: AgentNode, event: Event) -> None:
        """``event`` was appended to the log of ``node``'s agent."""
        ...

    def on_restore(self, node: AgentNode, events: Sequence[Event]) -> None:
        """``node``'s agent came back from its store (a restore or a wake) with this log."""
        ...

    def on_release(self, node: AgentNode, how: str) -> None:
        """``node``'s agent left memory: ``"stopped"``, ``"failed"`` or ``"passivated"``."""
        ...


class _Slot:
    __slots__ = ("observer",)

    def __init__(self) -> None:
        self.observer: TreeObserver | None = None


_slot = _Slot()
installed = _slot
"""Read ``installed.observer`` to skip `notify_event` when none is installed (a hot path)."""


def set_tree_observer(observer: TreeObserver | None) -> TreeObserver | None:
    """Install ``observer`` for every agent of this process (None removes it); returns the old."""
    previous, _slot.observer = _slot.observer, observer
    consumers_changed()
    return previous


def current_observer() -> TreeObserver | None:
    """The installed observer, or None."""
    return _slot.observer


def notify_event(node: AgentNode, event: Event) -> None:
    """Tell the observer, if any, about an appended event."""
    observer = _slot.observer
    if observer is not None:
        try:
            observer.on_event(node, event)
        except Exception:  # tracing must never break an agent
            _log.exception("tree observer failed", agent_id=node.agent_id)


def notify_restore(node: AgentNode, events: Sequence[Event]) -> None:
    """Tell the observer, if any, that an agent came back with ``events``."""
    observer = _slot.observer
    if observer is not None:
        try:
            observer.on_restore(node, events)
        except Exception:
            _log.exception("tree observer failed", agent_id=node.agent_id)


def notify_release(node: AgentNode, how: str) -> None:
    """Tell the observer, if any, that an agent left memory."""
    observer = _slot.observer
    if observer is not None:
        try:
            observer.on_release(node, how)
        except Exception:
            _log.exception("tree observer failed", agent_id=node.agent_id)
