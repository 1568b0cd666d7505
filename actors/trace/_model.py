"""What a trace is made of: spans and markers on one lane per agent, in tree order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from actors import Event, Usage

__all__ = ["SPAN_KINDS", "SPAN_STATUSES", "Lane", "Marker", "Span", "Trace"]

SpanKind = Literal["turn", "model", "tool", "subagent"]
SpanStatus = Literal["ok", "error", "cancelled", "interrupted", "suspended", "open"]
MarkerKind = Literal[
    "suspended",
    "resumed",
    "steered",
    "cancelled",
    "error",
    "recovered",
    "compacted",
    "custom",
    "fork",
]

SPAN_KINDS: Final = ("turn", "model", "tool", "subagent")
"""The kinds of span: a turn (a run), a model request (a step), a tool call, a subagent call."""

SPAN_STATUSES: Final = ("ok", "error", "cancelled", "interrupted", "suspended", "open")
"""How a span ended: ``ok``; ``error``; ``cancelled``; ``interrupted`` (closed by crash
recovery); ``suspended`` (waiting for an answer when the log ends); ``open`` (no end in the log:
still running when the session was loaded, or the process died and was never restored)."""


# Frozen dataclasses like the store's records: they never cross a wire as they are; the
# renderer writes the page's own compact JSON from them.
@dataclass(frozen=True, slots=True)
class Span:
    """Something of one agent that took time, read from its start and end events.

    Attributes:
        kind: ``"turn"`` (turn_start to turn_end), ``"model"`` (a model request: step_start to
            step_end), ``"tool"`` (tool_call to its tool result) or ``"subagent"`` (a call that
            ran a child agent: subagent_spawned to subagent_finished and the call's result).
        agent_id: The agent whose log holds the span's events.
        start: The ``created_at`` of its first event.
        end: The ``created_at`` of its last event (its start for a span that is one event). A
            span with no end in the log (status ``open`` or ``suspended``) ends with the last
            event of its agent's log: as far as the log knows, it was still going then.
        label: A short title: the run id, the model, the tool's name, the child's id.
        status: One of `SPAN_STATUSES`.
        seqs: The seqs of the events that make up the span, in order.
        child_id: For a subagent call, the child agent's id.
    """

    kind: SpanKind
    agent_id: str
    start: datetime
    end: datetime
    label: str
    status: SpanStatus
    seqs: tuple[int, ...]
    child_id: str | None = None


@dataclass(frozen=True, slots=True)
class Marker:
    """A moment of one agent, read from one event.

    Suspensions, resumes, steering, cancellations, errors, recoveries, compactions, and user
    events (a namespaced type such as ``app.note``).

    Attributes:
        kind: ``"suspended"``, ``"resumed"``, ``"steered"``, ``"cancelled"``, ``"error"``,
            ``"recovered"``, ``"compacted"``, ``"custom"``, or ``"fork"`` (on the root: where this
            session was forked from its original, or where a branch of it was cut).
        agent_id: The agent whose log holds the event.
        at: The event's ``created_at``.
        label: A short title read from the event.
        seq: The event's seq.
    """

    kind: MarkerKind
    agent_id: str
    at: datetime
    label: str
    seq: int


@dataclass(frozen=True, slots=True)
class Lane:
    """One agent of the tree, with everything its log shows.

    Attributes:
        agent_id: The agent's id.
        name: The agent's name (its spec's).
        parent_id: The parent's id, or None for the root.
        status: The agent's status as the store last recorded it.
        depth: How deep in the tree the agent sits (the root is 0).
        events: The agent's whole log, in order.
        spans: Its turns, model requests, tool and subagent calls, by start.
        markers: Its suspensions, resumes, steering, cancellations, errors, recoveries and user
            events, in order.
        usage: Everything the agent consumed, folded from its log as `AgentContext.usage` is.
    """

    agent_id: str
    name: str
    parent_id: str | None
    status: str
    depth: int
    events: tuple[Event, ...]
    spans: tuple[Span, ...]
    markers: tuple[Marker, ...]
    usage: Usage


@dataclass(frozen=True, slots=True)
class Trace:
    """A stored session as a timeline: one lane per agent, parents before their children.

    Attributes:
        session_id: The session's id.
        root_agent_id: The id of the tree's root.
        created_at: When the session was created.
        updated_at: When anything of the session was last written.
        lanes: One lane per agent, depth first in spawn order.
        forked_from: For a fork, the session it was forked from and the root's seq it was cut
            after.
        branches: The forks of this session the trace knows of, each with the root's seq it
            was cut after.
    """

    session_id: str
    root_agent_id: str
    created_at: datetime
    updated_at: datetime
    lanes: tuple[Lane, ...]
    forked_from: tuple[str, int] | None = None
    branches: tuple[tuple[str, int], ...] = ()

    @property
    def usage(self) -> Usage:
        """The whole tree's usage: the sum of every agent's own."""
        total = Usage()
        for lane in self.lanes:
            total = total + lane.usage
        return total

    @property
    def start(self) -> datetime | None:
        """The ``created_at`` of the earliest event of any agent, or None without events."""
        times = [event.created_at for lane in self.lanes for event in lane.events]
        return min(times) if times else None

    @property
    def end(self) -> datetime | None:
        """The ``created_at`` of the latest event of any agent, or None without events."""
        times = [event.created_at for lane in self.lanes for event in lane.events]
        return max(times) if times else None

    @property
    def event_count(self) -> int:
        """How many events the session's agents hold in all."""
        return sum(len(lane.events) for lane in self.lanes)

    def lane(self, agent_id: str) -> Lane:
        """The lane of the agent with this id.

        Raises:
            KeyError: No agent of the trace has that id.
        """
        for lane in self.lanes:
            if lane.agent_id == agent_id:
                return lane
        raise KeyError(f"trace of session {self.session_id!r} has no agent {agent_id!r}")
