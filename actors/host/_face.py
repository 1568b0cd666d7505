"""`HostFace` and `SessionHost`: what every host shows its user, said once.

`Runtime`, `Simulation` and `RayRuntime` are different hosts of the same agent loop (threads,
a virtual clock, a cluster); code that only spawns agents and talks to them through refs can
take any of them typed as a `HostFace`, and code that keeps sessions in a store as a
`SessionHost` (`Runtime`, `RayRuntime`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, Self, TypeVar

from actors.host._ref import AgentRef
from actors.loop._agent import Agent

__all__ = ["HostFace", "SessionHost"]

OutputT = TypeVar("OutputT")


class HostFace(Protocol):
    """A host of agents, as its user sees it: spawn roots, find refs, shut down.

    Every host is a context manager that shuts itself down on exit. What a host does not share
    (a `Simulation`'s clock, a `Runtime`'s sessions) is on the host itself.
    """

    def spawn(
        self,
        agent: Agent[OutputT],
        *,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AgentRef[OutputT]:
        """Start a root agent of ``agent`` and return its ref.

        Args:
            agent: The spec.
            tool_context: The static channel, forwarded unchanged to every descendant.
            metadata: The initial metadata (plain JSON); children start with a snapshot of it.
        """
        ...

    def ref(self, agent_id: str) -> AgentRef[Any]:
        """The ref of an agent of this host (a root or a child), by id."""
        ...

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every agent of the host; idempotent."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class SessionHost(HostFace, Protocol):
    """A host that keeps sessions in a store: it opens them, and restores them after a crash."""

    def open_session(
        self,
        agent: Agent[OutputT],
        *,
        session_id: str,
        store: Any,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AgentRef[OutputT]:
        """The root of a session: live already, woken or restored from ``store``, or new."""
        ...

    def restore(
        self,
        session_id: str,
        *,
        store: Any,
        agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]],
        tool_context: Any = None,
    ) -> AgentRef[Any]:
        """Rebuild a stored tree (its interrupted turns closed) and return its root's ref."""
        ...
