"""The serialized form of an `AgentContext` (version 2), and readers for versions 1 and 2."""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from actors._logging import get_logger
from actors.context._events import Clock, Event, is_known_type
from actors.context._json import MAX_WRAPPED_DEPTH, json_copy
from actors.context._messages import Message, message_adapter
from actors.context._payloads import PayloadError, check_payload, first_error
from actors.context._update import ContextUpdate
from actors.context._usage import Usage
from actors.exceptions import SerializationError, UserError

__all__ = ["FORMAT_VERSION", "deserialize_context", "serialize_context"]

FORMAT_VERSION = 2

_log = get_logger("actors.serialization")

C = TypeVar("C")


class Serializable(Protocol):
    """What serialization reads of a context (`AgentContext` has it all)."""

    @property
    def agent_id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def system_prompt(self) -> str | None: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def iteration(self) -> int: ...
    @property
    def needs_response(self) -> bool: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def events(self) -> Sequence[Event]: ...
    @property
    def messages(self) -> Sequence[Message]: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def suspended(self) -> Mapping[str, Any]: ...


def serialize_context(ctx: Serializable) -> dict[str, Any]:
    """Return the version-2 form of ``ctx``: plain JSON, no ``tool_context``, no runtime state."""
    return {
        "version": FORMAT_VERSION,
        "agent_id": ctx.agent_id,
        "name": ctx.name,
        "parent_id": ctx.parent_id,
        # The logged system prompt, redundant with the events (the overlay is never written).
        "system_prompt": ctx.system_prompt,
        "max_iterations": ctx.max_iterations,
        "iteration": ctx.iteration,
        "needs_response": ctx.needs_response,
        "run_id": ctx.run_id,
        "events": [event.model_dump(mode="json") for event in ctx.events],
        # Redundant with the events; kept for readers of version 1.
        "messages": [message.model_dump(mode="json") for message in ctx.messages],
        # Copies: the caller may change the blob, and it must not reach the live context.
        "metadata": json_copy(ctx.metadata, max_depth=MAX_WRAPPED_DEPTH),
        "usage": ctx.usage.model_dump(),
        "suspended": json_copy(list(ctx.suspended.values()), max_depth=MAX_WRAPPED_DEPTH),
    }


def deserialize_context(
    blob: Mapping[str, Any],
    *,
    clock: Clock,
    from_events: Callable[..., C],
    from_messages: Callable[..., C],
) -> C:
    """Rebuild a context from a version 1 or 2 blob; see `AgentContext.deserialize`.

    The context is built by ``from_events`` (a version-2 log to fold) or ``from_messages``
    (version 1's messages, metadata and usage to seed a new log): `AgentContext`'s
    constructors, handed in so this module needs nothing of the class itself.
    """
    if not isinstance(blob, Mapping):
        raise SerializationError(
            f"a serialized context is a mapping, got {type(blob).__name__}; "
            "pass the dict that AgentContext.serialize() returned"
        )
    try:
        return _read(blob, clock, from_events, from_messages)
    except SerializationError as exc:
        agent_id = blob.get("agent_id")
        if isinstance(agent_id, str) and agent_id:  # say whose log it is: a store holds many
            raise SerializationError(f"agent {agent_id!r}: {exc}") from None
        raise


def _read(
    blob: Mapping[str, Any],
    clock: Clock,
    from_events: Callable[..., C],
    from_messages: Callable[..., C],
) -> C:
    version = blob.get("version")
    # Compare types too: True == 1 and 2.0 == 2, but neither is a version this library wrote.
    if type(version) is int and version == 2:
        # Rebuilding a long log allocates tens of thousands of small objects, none of them
        # garbage: the cyclic collector would only rescan them (about a third of the time,
        # measured on 10,000 events). Paused for the rebuild only, restored even on error.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return _read_v2(blob, clock, from_events)
        finally:
            if collecting:
                gc.enable()
    if type(version) is int and version == 1:
        return _read_v1(blob, clock, from_messages)
    raise SerializationError(
        f"unknown serialization version {version!r}: this library reads versions 1 and 2; "
        "a newer library wrote this blob, or it is not a serialized context"
    )


def _field(blob: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = blob.get(name, default)
    if value is not default and not isinstance(value, kind):
        raise SerializationError(
            f"field {name!r} of the serialized context has the wrong type ({type(value).__name__})"
        )
    return value


def _common(blob: Mapping[str, Any]) -> dict[str, Any]:
    agent_id = _field(blob, "agent_id", str, "agent") or "agent"
    max_iterations = _field(blob, "max_iterations", int, 50)
    if max_iterations < 1:
        raise SerializationError(f"field 'max_iterations' must be positive, got {max_iterations}")
    # Checked, not read back: a logged system prompt is in the messages, and the overlay that
    # older versions wrote here is re-derived by the code that runs now.
    _field(blob, "system_prompt", (str, type(None)), None)
    return {
        "agent_id": agent_id,
        "name": _field(blob, "name", (str, type(None)), None),
        "parent_id": _field(blob, "parent_id", (str, type(None)), None),
        "max_iterations": max_iterations,
    }


def _read_v2(blob: Mapping[str, Any], clock: Clock, build: Callable[..., C]) -> C:
    common = _common(blob)
    raw_events = blob.get("events")
    if not isinstance(raw_events, list):
        raise SerializationError("a version 2 context needs an 'events' list")
    events: list[Event] = []
    parsed: dict[int, tuple[Message | None, ContextUpdate | None]] = {}
    expected = 0
    for index, raw in enumerate(raw_events):
        try:
            event = Event.model_validate(raw)
        except ValidationError as exc:
            raise SerializationError(f"event {index} is malformed: {first_error(exc)}") from None
        # Check seq before dropping unknown types: a dropped event is not a gap.
        if event.seq != expected:
            _log.warning("gap in event seq", expected=expected, found=event.seq)
        expected = event.seq + 1
        if not is_known_type(event.type):
            _log.warning("unknown event type dropped", event_type=event.type, seq=event.seq)
            continue
        payload = _check_payload(event, index)
        if payload != (None, None):
            parsed[len(events)] = payload
        # Rebuilt logs are renumbered densely: seq is the index in this log.
        if event.seq != len(events):
            event = event.model_copy(update={"seq": len(events)})
        events.append(event)
    try:
        return build(events, clock=clock, parsed_payloads=parsed, **common)
    except UserError as exc:  # a payload that validated alone but cannot be folded in order
        raise SerializationError(f"the events cannot be replayed: {exc}") from None


def _check_payload(event: Event, index: int) -> tuple[Message | None, ContextUpdate | None]:
    """Validate an event's payload; return the message or update it holds (parsed once)."""
    try:
        return check_payload(event.type, event.data)
    except PayloadError as exc:
        raise SerializationError(
            f"event {index} ({event.type}) has a malformed payload: {exc}"
        ) from None


def _read_v1(blob: Mapping[str, Any], clock: Clock, build: Callable[..., C]) -> C:
    common = _common(blob)
    raw_messages = blob.get("messages")
    if not isinstance(raw_messages, list):
        raise SerializationError("a version 1 context needs a 'messages' list")
    try:
        messages = [message_adapter.validate_python(raw) for raw in raw_messages]
    except ValidationError as exc:
        raise SerializationError(f"a message is malformed: {first_error(exc)}") from None
    metadata = _field(blob, "metadata", Mapping, {}) or {}
    try:
        usage = Usage(**(_field(blob, "usage", Mapping, {}) or {}))
    except ValidationError as exc:
        raise SerializationError(f"field 'usage' is malformed: {first_error(exc)}") from None
    try:
        return build(messages, metadata=metadata, usage=usage, clock=clock, **common)
    except UserError as exc:  # metadata that is not plain JSON, or nested too deeply
        raise SerializationError(f"the version 1 context cannot be read: {exc}") from None
