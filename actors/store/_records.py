"""The small frozen records a session store takes and gives back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from actors._text import id_problem
from actors.exceptions import UserError

__all__ = ["AGENT_STATUSES", "AgentRecord", "SessionInfo", "StoredAgent", "StoredSession"]

AGENT_STATUSES: Final = frozenset(
    {"idle", "running", "suspended", "finished", "failed", "cancelled", "stopped"}
)
"""The statuses the runtime records. A store keeps any non-empty status string unchanged."""


# Plain frozen dataclasses rather than pydantic models: they never cross a wire as a whole (a
# store writes their fields as columns), and they take positional arguments.
@dataclass(frozen=True, slots=True)
class AgentRecord:
    """One agent of a session's tree, as the store keeps it beside the agent's events.

    Attributes:
        agent_id: The agent's id, unique within its session.
        parent_id: The parent agent's id, or None for the root.
        name: The agent's name: the name of its spec, used to match specs on restore.
        status: Where the agent stands: ``"idle"``, ``"running"``, ``"suspended"``,
            ``"finished"``, ``"failed"``, ``"cancelled"`` or ``"stopped"`` (see
            `AGENT_STATUSES`).
        position: The agent's spawn order in its session; `SessionStore.load` returns agents
            sorted by it (ties in the order they were first put).

    Raises:
        UserError: A field of the wrong type, an empty id, name or status, or a negative
            position.
    """

    agent_id: str
    parent_id: str | None
    name: str
    status: str
    position: int = 0

    def __post_init__(self) -> None:
        for label in ("agent_id", "name", "status"):
            value = getattr(self, label)
            if not isinstance(value, str) or not value:
                raise UserError(f"AgentRecord.{label} must be a non-empty string, got {value!r}")
            if problem := id_problem(value):
                raise UserError(f"AgentRecord.{label} {value!r} cannot be stored: {problem}")
        if self.parent_id is not None and (
            not isinstance(self.parent_id, str) or not self.parent_id
        ):
            raise UserError(
                f"AgentRecord.parent_id must be a non-empty string or None, got {self.parent_id!r}"
            )
        if not isinstance(self.position, int) or isinstance(self.position, bool):
            raise UserError(f"AgentRecord.position must be an int, got {self.position!r}")
        if self.position < 0:
            raise UserError(f"AgentRecord.position must not be negative, got {self.position}")


@dataclass(frozen=True, slots=True)
class StoredAgent:
    """One agent of a loaded session: its record and its serialized context.

    Attributes:
        record: The agent's record as last put.
        context: A version-2 serialized context (``{"version": 2, "agent_id", "name",
            "parent_id", "events": [...]}``) that `AgentContext.deserialize` reads. A fresh
            dict on every load: the caller may keep or change it.
        snapshot: Only from ``load(session_id, snapshots=True)``: the agent's latest snapshot
            as written by `SessionStore.put_snapshot` (an empty dict when it cannot be read),
            or None when it has none.
        first_seq: The seq of the first event in ``context``: 0, or the snapshot's ``seq``
            when ``snapshot`` is given (the events before it were not read).
    """

    record: AgentRecord
    context: dict[str, Any]
    snapshot: dict[str, Any] | None = None
    first_seq: int = 0

    @property
    def agent_id(self) -> str:
        """The agent's id."""
        return self.record.agent_id


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A whole session as loaded from a store.

    Attributes:
        session_id: The session's id.
        root_agent_id: The id of the tree's root agent.
        data: The small JSON object given to `SessionStore.create_session`.
        created_at: When the session was created (aware, UTC).
        updated_at: When anything of the session was last written (aware, UTC).
        agents: Every agent of the session, in spawn order.
    """

    session_id: str
    root_agent_id: str
    data: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    agents: tuple[StoredAgent, ...] = field(default=())

    def agent(self, agent_id: str) -> StoredAgent:
        """The stored agent with this id.

        Raises:
            KeyError: No agent of the session has that id.
        """
        for stored in self.agents:
            if stored.record.agent_id == agent_id:
                return stored
        raise KeyError(f"session {self.session_id!r} has no agent {agent_id!r}")

    def tree_order(self) -> Iterator[tuple[StoredAgent, int]]:
        """Each agent with its depth: depth first from the root, children in spawn order.

        Agents the root does not reach (a parent missing from the session, a second root) come
        last, each at depth 0 with its own subtree.
        """
        children: dict[str | None, list[StoredAgent]] = {}
        for agent in self.agents:
            children.setdefault(agent.record.parent_id, []).append(agent)
        roots = [a for a in self.agents if a.record.agent_id == self.root_agent_id]
        roots += [a for a in self.agents if a.record.agent_id != self.root_agent_id]
        stack = [(agent, 0) for agent in reversed(roots)]
        seen: set[str] = set()
        while stack:
            agent, depth = stack.pop()
            if agent.record.agent_id in seen:
                continue
            seen.add(agent.record.agent_id)
            yield agent, depth
            below = children.get(agent.record.agent_id, [])
            stack.extend((child, depth + 1) for child in reversed(below))


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A summary of one session, as `SessionStore.list_sessions` gives it.

    Attributes:
        session_id: The session's id.
        root_agent_id: The id of the tree's root agent.
        data: The small JSON object given to `SessionStore.create_session`.
        created_at: When the session was created (aware, UTC).
        updated_at: When anything of the session was last written (aware, UTC).
        agent_count: How many agents the session holds.
        event_count: How many events its agents hold in all.
    """

    session_id: str
    root_agent_id: str
    data: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    agent_count: int
    event_count: int
