"""Snapshots of a context's fold: what an activation reads instead of its whole log.

A snapshot holds what folding an agent's log up to one event gave (the transcript with each
message's time and seq, metadata, usage, counters, open suspensions, what restore needs of
turns and children), the seq of that last event (``folded``) and a digest of it, and ``seq``:
the first event read with it (``folded``, or the start of a turn still open, which a restore
scans). The log stays the truth: a snapshot is used only when the stored event at ``folded``
has its digest, and when it was written in this format; otherwise it is ignored (logged at
debug) and the log is folded from the start, as without one.

A context built from a snapshot plus the events after it equals the context folded from the
whole log, except that the events before the snapshot are read from the store the first time
someone asks for them (`AgentContext.events`), not at activation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from actors._logging import get_logger
from actors.context._agent_context import AgentContext, _data_of, _message_of
from actors.context._events import Clock, Event, is_known_type, system_clock
from actors.context._json import MAX_WRAPPED_DEPTH, json_copy
from actors.context._payloads import PayloadError, check_payload

__all__ = ["SNAPSHOT_VERSION", "event_digest", "from_snapshot", "take_snapshot"]

SNAPSHOT_VERSION: Final = 1
"""The snapshot format this library writes and reads; a snapshot of another is rebuilt."""

_log = get_logger("actors.snapshot")

_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def event_digest(event: Event) -> str:
    """A digest of an event's type, data and time: tells whether a snapshot fits a log."""
    text = f"{event.seq}\x00{event.type}\x00{event.created_at.isoformat()}\x00"
    return hashlib.sha256((text + _canonical(event.data)).encode()).hexdigest()[:32]


def take_snapshot(ctx: AgentContext) -> dict[str, Any]:
    """The fold of ``ctx`` at its last event, as a plain JSON object.

    It needs no event before its last (a context activated from a snapshot has not read
    them).

    Raises:
        ValueError: The context has no event.
    """
    if not ctx.event_count:
        raise ValueError("a snapshot is taken of a context with at least one event")
    last = ctx._event_at(ctx.event_count - 1)
    requests, tokens_in, tokens_out, calls = ctx._used
    # An open turn (a suspended run) is read again from its start: a restore scans it.
    start = min(ctx._turn_seq, last.seq) if ctx._open_turn is not None else last.seq
    return {
        "version": SNAPSHOT_VERSION,
        "agent_id": ctx.agent_id,
        "seq": max(start, 0),  # what the store reads from: the events an activation reads
        "folded": last.seq,
        "digest": event_digest(last),
        "messages": [_data_of(m) for m in ctx._messages],
        "created": [t.isoformat() for t in ctx._created],
        "seqs": list(ctx._seqs),
        "metadata": json_copy(ctx._metadata, max_depth=MAX_WRAPPED_DEPTH),
        "used": [requests, tokens_in, tokens_out, calls, *_cached(ctx)],
        "iteration": ctx._iteration,
        "needs_response": ctx._needs_response,
        "run_id": ctx._run_id,
        "suspended": json_copy(ctx._suspended, max_depth=MAX_WRAPPED_DEPTH),
        "sent": ctx._sent,
        "heard": dict(ctx._heard),
        "open_turn": ctx._open_turn,
        "turn_seq": ctx._turn_seq,
        "turns": ctx._turns,
        "budgeted": ctx._budgeted,
        "spawned": json_copy(ctx._spawned, max_depth=MAX_WRAPPED_DEPTH),
        "kept_ids": sorted(ctx._kept_ids),
        "kept_names": dict(ctx._kept_names),
        "children_spawned": ctx._children_spawned,
    }


class _Unfit(Exception):
    """The snapshot does not fit (the reason is its message)."""


def from_snapshot(
    snapshot: Mapping[str, Any],
    tail: Sequence[Mapping[str, Any]],
    *,
    read_before: Callable[[int], Sequence[Event]],
    agent_id: str,
    name: str | None = None,
    parent_id: str | None = None,
    max_iterations: int = 50,
    clock: Clock = system_clock,
) -> AgentContext | None:
    """A context from a snapshot and the stored events from its ``seq`` on, or None.

    Args:
        snapshot: What `take_snapshot` gave (as a store returns it).
        tail: The stored events (``event.model_dump(mode="json")`` form) from the snapshot's
            ``seq`` on: those up to its ``folded`` are in it (the last is checked against its
            digest), the ones after are folded on top.
        read_before: Reads the stored events of seqs below its argument (in order); called
            when someone first reads them.
        agent_id: The agent's id.
        name: The agent's name.
        parent_id: The parent's id.
        max_iterations: As for `AgentContext`.
        clock: As for `AgentContext`.

    Returns:
        None when the snapshot does not fit the log (logged at debug): fold the whole log.
    """
    try:
        return _build(snapshot, tail, read_before, agent_id, name, parent_id, max_iterations, clock)
    except _Unfit as exc:
        _log.debug("snapshot ignored", agent_id=agent_id, reason=str(exc))
    except (KeyError, TypeError, ValueError, IndexError, ValidationError, PayloadError) as exc:
        _log.debug("snapshot ignored", agent_id=agent_id, reason=f"unreadable: {exc!r}")
    return None


def _build(
    snap: Mapping[str, Any],
    tail: Sequence[Mapping[str, Any]],
    read_before: Callable[[int], Sequence[Event]],
    agent_id: str,
    name: str | None,
    parent_id: str | None,
    max_iterations: int,
    clock: Clock,
) -> AgentContext:
    version = snap.get("version") if isinstance(snap, Mapping) else None
    if type(version) is not int or version != SNAPSHOT_VERSION:
        raise _Unfit(f"format {version!r}, this library reads {SNAPSHOT_VERSION}")
    seq, folded = snap["seq"], snap["folded"]
    if type(seq) is not int or type(folded) is not int or not 0 <= seq <= folded:
        raise _Unfit("it names no event")
    if snap.get("agent_id") != agent_id:
        raise _Unfit(f"it is a snapshot of agent {snap.get('agent_id')!r}")
    events = [Event.model_validate(raw) for raw in tail]
    if not events or events[0].seq != seq or len(events) <= folded - seq:
        raise _Unfit(f"the log holds no event {folded}")
    if event_digest(events[folded - seq]) != snap["digest"]:
        raise _Unfit(f"event {folded} of the log is not the one it was taken at")
    for offset, event in enumerate(events):
        # A gap or a type this library drops would renumber the log: fold it from the start.
        if event.seq != seq + offset or not is_known_type(event.type):
            raise _Unfit(f"the log after it has a gap or an unknown event at {event.seq}")
    ctx = AgentContext(
        agent_id, name=name, parent_id=parent_id, max_iterations=max_iterations, clock=clock
    )
    messages = [_message_of(data) for data in snap["messages"]]
    created = [datetime.fromisoformat(text) for text in snap["created"]]
    seqs = [int(s) for s in snap["seqs"]]
    if not len(messages) == len(created) == len(seqs):
        raise _Unfit("its transcript is inconsistent")
    metadata, suspended, spawned = snap["metadata"], snap["suspended"], snap["spawned"]
    if not (isinstance(metadata, dict) and isinstance(suspended, dict)):
        raise _Unfit("its metadata or suspensions are not objects")
    if not isinstance(spawned, dict):
        raise _Unfit("its children are not an object")
    used = tuple(int(n) for n in snap["used"])
    if len(used) not in (4, 6):
        raise _Unfit("its usage is malformed")
    ctx._messages, ctx._created, ctx._seqs = messages, created, seqs
    ctx._metadata = metadata
    ctx._used = (used[0], used[1], used[2], used[3])
    ctx._cached = (used[4], used[5]) if len(used) == 6 else (0, 0)
    ctx._usage = None  # built from the counts when asked
    ctx._iteration = int(snap["iteration"])
    ctx._needs_response = bool(snap["needs_response"])
    ctx._run_id = _optional_str(snap["run_id"])
    ctx._suspended = suspended
    ctx._sent = int(snap["sent"])
    ctx._heard = {str(k): int(v) for k, v in dict(snap["heard"]).items()}
    ctx._open_turn = _optional_str(snap["open_turn"])
    ctx._turn_seq = int(snap["turn_seq"])
    ctx._turns = int(snap["turns"])
    ctx._budgeted = bool(snap.get("budgeted", True))  # an older snapshot: read the log to know
    ctx._spawned = spawned
    ctx._kept_ids = {str(i) for i in snap["kept_ids"]}
    ctx._kept_names = {str(k): str(v) for k, v in dict(snap["kept_names"]).items()}
    ctx._children_spawned = int(snap["children_spawned"])
    # The events before ``seq`` are read on first need; those up to ``folded`` are in the fold.
    ctx._events = [None] * seq  # type: ignore[list-item]  # places of unread events
    ctx._events.extend(events[: folded - seq + 1])
    ctx._unread, ctx._read_unread = seq, read_before
    for event in events[folded - seq + 1 :]:
        message, update = check_payload(event.type, event.data)
        ctx._apply(event, message=message, update=update)
        ctx._events.append(event)
    ctx._first_lazy = len(ctx._events)
    return ctx


def _optional_str(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _Unfit(f"{value!r} is not a string")
    return value


def _cached(ctx: AgentContext) -> tuple[int, ...]:
    """The cache counts, when there are any (a snapshot without them reads as before)."""
    read, written = ctx._cached
    return (read, written) if read or written else ()
