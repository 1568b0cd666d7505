"""What every store does the same way: encode events, apply the seq rules, build loaded blobs.

A store keeps each event as four columns: ``seq``, ``type``, ``data`` (JSON text) and
``created_at`` (the JSON form pydantic gives the datetime), so a loaded event is exactly
``event.model_dump(mode="json")``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from pydantic import TypeAdapter

from actors._text import clean_json, has_surrogate_escape, id_problem
from actors.context._events import Event
from actors.context._json import MAX_WRAPPED_DEPTH, JsonError, depth_exceeds, json_copy
from actors.context._serialization import FORMAT_VERSION
from actors.exceptions import StoreError, UserError
from actors.store._blobs import Blob, externalize_text, has_refs, inline, may_hold_parts
from actors.store._records import AgentRecord, StoredAgent
from actors.store._snapshots import decode_snapshot

__all__ = [
    "EncodedEvent",
    "check_id",
    "check_storable",
    "check_own_record",
    "check_range",
    "check_record",
    "context_blob",
    "decode_data",
    "decode_log",
    "decode_time",
    "encode_data",
    "encode_events",
    "externalize",
    "new_events",
    "stored_agents",
]

_datetime = TypeAdapter(datetime)
# One encoder for every call: json.dumps builds a new one whenever an option is given.
_encoder = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """An event as a store writes it: its JSON payload and timestamp already encoded."""

    seq: int
    type: str
    data: str
    created_at: str


def check_id(label: str, value: object) -> str:
    """Return ``value`` when it is a non-empty string; raise `UserError` otherwise."""
    if not isinstance(value, str) or not value:
        raise UserError(f"{label} must be a non-empty string, got {value!r}")
    if problem := id_problem(value):
        raise UserError(f"{label} {value!r} cannot be stored: {problem}")
    return value


def check_range(start: object, stop: object) -> tuple[int, int | None]:
    """The ``start`` and ``stop`` of `SessionStore.read_events`, checked.

    Raises:
        UserError: Either is not an int (``stop`` may be None).
    """
    for label, value in (("start", start), ("stop", stop)):
        if (value is not None or label == "start") and (
            type(value) is not int  # bool is an int, not a seq
        ):
            raise UserError(f"read_events: {label} must be an int seq, got {value!r}")
    return start, stop  # type: ignore[return-value]  # checked above


def check_storable(session_id: object, agent_id: object = None) -> None:
    """Refuse an id that no store could keep (see `id_problem`) with a `UserError`.

    Other mistakes (not a string, empty) are left to the checks and lookups that follow, which
    already answer them; this one would otherwise surface as the driver's encoding error.
    """
    for label, value in (("session_id", session_id), ("agent_id", agent_id)):
        if isinstance(value, str) and (problem := id_problem(value)):
            raise UserError(f"{label} {value!r} cannot be stored: {problem}")


def check_record(record: object) -> AgentRecord:
    """Return ``record`` when it is an `AgentRecord`; raise `UserError` otherwise."""
    if not isinstance(record, AgentRecord):
        raise UserError(f"put_agent takes an AgentRecord, got {type(record).__name__}")
    return record


def encode_data(label: str, value: Mapping[str, Any] | None) -> str:
    """Encode a small JSON object (a session's ``data``) as text.

    Raises:
        UserError: ``value`` is not a mapping of plain JSON.
    """
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise UserError(f"{label} must be a mapping of plain JSON, got {type(value).__name__}")
    try:
        return _encoder.encode(json_copy(dict(value), label))
    except JsonError as exc:
        raise UserError(f"{exc}; {label} is plain JSON") from None


def check_begin(session_id: object, root: object, data: Mapping[str, Any] | None) -> str:
    """The arguments of `begin_session`, checked (every store the same); the data encoded."""
    check_id("session_id", session_id)
    check_id("root_agent_id", check_record(root).agent_id)
    return encode_data("session data", data)


def encode_events(session_id: str, agent_id: str, events: Iterable[Event]) -> list[EncodedEvent]:
    """Encode a batch, checking that each item is an `Event` with a plain-JSON payload.

    Raises:
        UserError: An item is not an `Event`, or its data is not plain JSON.
    """
    encoded: list[EncodedEvent] = []
    for index, event in enumerate(events):
        if not isinstance(event, Event):
            raise UserError(
                f"append_events takes Event objects; item {index} of the batch for agent "
                f"{agent_id!r} of session {session_id!r} is a {type(event).__name__}"
            )
        try:
            if depth_exceeds(event.data, MAX_WRAPPED_DEPTH):
                raise ValueError(f"it nests more than {MAX_WRAPPED_DEPTH} levels deep")
            data = _encoder.encode(event.data)
        except (TypeError, ValueError, RecursionError) as exc:
            raise UserError(
                f"event seq {event.seq} ({event.type}) of agent {agent_id!r} in session "
                f"{session_id!r} has a payload that is not plain JSON: {exc}"
            ) from None
        created_at = _datetime.dump_python(event.created_at, mode="json")
        encoded.append(EncodedEvent(event.seq, event.type, data, created_at))
    return encoded


def new_events(
    session_id: str,
    agent_id: str,
    batch: Sequence[EncodedEvent],
    last_seq: int,
    stored: Callable[[int, int], Mapping[int, tuple[str, str]]],
) -> Sequence[EncodedEvent]:
    """Check ``batch`` against the agent's stored log and return the events still to write.

    The batch must be contiguous and start at or before ``last_seq + 1``. Events at a seq that
    is already stored must match the stored ``type`` and ``data`` (an idempotent re-append after
    a crash) and are dropped from the result.

    Args:
        session_id: The session, for error messages.
        agent_id: The agent, for error messages.
        batch: The encoded batch, in order.
        last_seq: The agent's highest stored seq, -1 when it has none.
        stored: ``stored(first, last)`` returns ``{seq: (type, data)}`` of the stored events
            with ``first <= seq <= last``.

    Raises:
        StoreError: A gap (inside the batch or after the stored log), or an event that differs
            from the one stored at its seq. The caller writes nothing of the batch.
    """
    if not batch:
        return batch
    where = f"agent {agent_id!r} of session {session_id!r}"
    first = batch[0].seq
    for offset, event in enumerate(batch):
        if event.seq != first + offset:
            raise StoreError(
                f"the batch for {where} is not contiguous: seq {event.seq} follows "
                f"seq {first + offset - 1}; append events in log order without gaps"
            )
    if first < 0:
        raise StoreError(f"the batch for {where} starts at a negative seq ({first})")
    if first > last_seq + 1:
        raise StoreError(
            f"the batch for {where} starts at seq {first} but the stored log ends at seq "
            f"{last_seq}: events {last_seq + 1}..{first - 1} are missing; append them first "
            f"(store.last_seq() tells where the stored log ends)"
        )
    overlap = min(len(batch), last_seq + 1 - first)
    if overlap > 0:
        existing = stored(first, first + overlap - 1)
        for event in batch[:overlap]:
            kept = existing.get(event.seq)
            if kept is None or not _same(kept, event):
                was = f"a {kept[0]} event" if kept else "an event"
                raise StoreError(
                    f"seq {event.seq} of {where} already holds {was} that differs from the new "
                    f"{event.type} event; nothing of the batch was written. Reload the session "
                    "(store.load) instead of appending from a stale context"
                )
    return batch[overlap:]


def _same(kept: tuple[str, str], event: EncodedEvent) -> bool:
    kept_type, kept_data = kept
    if kept_type != event.type:
        return False
    if kept_data == event.data:
        return True
    kept_value, new_value = json.loads(kept_data), json.loads(event.data)
    # An event of an older version, read back under the text rule, is the same event.
    return bool(kept_value == new_value or clean_json(kept_value) == new_value)


def check_own_record(record: object, agent_id: str) -> None:
    """Check the ``record`` given to ``append_events`` is the appending agent's.

    Raises:
        UserError: It is not an `AgentRecord`, or it is another agent's.
    """
    if check_record(record).agent_id != agent_id:
        raise UserError(
            f"append_events for agent {agent_id!r} was given the record of agent "
            f"{check_record(record).agent_id!r}; pass the appending agent's own record"
        )


def externalize(batch: Sequence[EncodedEvent]) -> tuple[list[EncodedEvent], dict[str, Blob]]:
    """A batch of encoded events with their parts' data replaced by references.

    Returns:
        The events to store (the same objects where nothing changed) and the blobs they
        refer to, by hash (each once, however many parts hold it).
    """
    found: dict[str, Blob] = {}
    out: list[EncodedEvent] = []
    for event in batch:
        if may_hold_parts(event.data):
            text = externalize_text(event.data, found)
            out.append(event if text is event.data else replace(event, data=text))
        else:
            out.append(event)
    return out, found


def decode_log(
    rows: Sequence[tuple[int, str, str, str]], blobs: Mapping[str, Blob] | None = None
) -> list[dict[str, Any]]:
    """Stored ``(seq, type, data, created_at)`` rows as ``event.model_dump(mode="json")`` gives.

    Args:
        rows: The stored rows, in seq order.
        blobs: The blobs the rows refer to (see `actors.store._blobs`), by hash; None for a
            store that keeps parts inline.

    Raises:
        ValueError: A stored payload is not JSON, or nests too deeply, or refers to a blob
            missing from ``blobs`` (the store is damaged).
    """
    joined = "[" + ",".join([_text(row[2]) for row in rows]) + "]"
    try:
        # One parse of the joined payloads costs a third of one parse per event.
        payloads = json.loads(joined)
    except RecursionError:
        raise ValueError("a stored event payload nests too deeply to be read") from None
    if has_surrogate_escape(joined):
        # An older version logged text with lone surrogates (today's doors replace them): the
        # text rule on the way out, or every reader and the session's next request would fail.
        payloads = clean_json(payloads)
    if len(payloads) != len(rows):
        raise ValueError("a stored event payload is not one JSON value")
    for (seq, _, _, _), payload in zip(rows, payloads, strict=True):
        if type(payload) is not dict:
            raise ValueError(
                f"the payload of event {seq} is a {type(payload).__name__}, not an object"
            )
    if blobs is not None and has_refs(joined):
        payloads = [
            inline(payload, blobs) if has_refs(row[2]) else payload
            for row, payload in zip(rows, payloads, strict=True)
        ]
    return [
        {"seq": seq, "type": kind, "data": data, "created_at": created_at}
        for (seq, kind, _, created_at), data in zip(rows, payloads, strict=True)
    ]


def decode_data(text: object) -> dict[str, Any]:
    """A session's stored ``data`` (JSON text of an object).

    Raises:
        ValueError: It is not the JSON text of an object (the store is damaged).
    """
    try:
        data = json.loads(_text(text))
    except RecursionError:
        raise ValueError("the session's data nests too deeply to be read") from None
    if not isinstance(data, dict):
        raise ValueError(f"the session's data is a {type(data).__name__}, not a JSON object")
    return clean_json(data)  # type: ignore[no-any-return]


def decode_time(text: object) -> datetime:
    """A stored timestamp (ISO 8601 text).

    Raises:
        ValueError: It is not an ISO 8601 timestamp (the store is damaged).
    """
    return datetime.fromisoformat(_text(text))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"a stored text column holds a {type(value).__name__}")
    return value


def context_blob(record: AgentRecord, events: list[dict[str, Any]]) -> dict[str, Any]:
    """A version-2 serialized context of ``record``'s agent holding ``events``."""
    return {
        "version": FORMAT_VERSION,
        "agent_id": record.agent_id,
        "name": record.name,
        "parent_id": record.parent_id,
        "events": events,
    }


def stored_agents(
    agent_rows: Iterable[Sequence[Any]],
    event_rows: Iterable[Sequence[Any]],
    damaged: Callable[[str, Exception], StoreError],
    snapshots: Mapping[str, tuple[int, str]] | None = None,
    blobs: Mapping[str, Blob] | None = None,
) -> tuple[StoredAgent, ...]:
    """The loaded agents of a session, from its stored rows.

    Args:
        agent_rows: ``(agent_id, parent_id, name, status, position)`` rows, in spawn order.
        event_rows: ``(agent_id, seq, type, data, created_at)`` rows, grouped by agent and in
            seq order within each agent.
        damaged: Makes the error for an agent whose stored row or payload cannot be read.
        snapshots: ``(seq, text)`` of the agents that have a snapshot, when the session is
            loaded with them: their ``event_rows`` start at that seq.
        blobs: The blobs the rows and snapshots refer to, by hash (see `decode_log`).

    Raises:
        StoreError: What ``damaged`` makes, when a stored row or payload cannot be read.
    """
    rows_of: dict[str, list[tuple[int, str, str, str]]] = {}
    for agent_id, group in groupby(event_rows, key=itemgetter(0)):
        rows_of[agent_id] = [(row[1], row[2], row[3], row[4]) for row in group]
    agents = []
    for row in agent_rows:
        try:
            record = AgentRecord(*row)
            events = decode_log(rows_of.get(record.agent_id, []), blobs)
        except (ValueError, TypeError) as exc:  # UserError is a ValueError too
            raise damaged(str(row[0]) if row else "?", exc) from exc
        stored = (snapshots or {}).get(record.agent_id)
        if stored is None:
            agents.append(StoredAgent(record, context_blob(record, events)))
        else:
            blob = context_blob(record, events)
            snapshot = decode_snapshot(stored[1], blobs)
            agents.append(StoredAgent(record, blob, snapshot, stored[0]))
    return tuple(agents)
