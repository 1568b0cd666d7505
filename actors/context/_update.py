"""`ContextUpdate`: how a tool changes its agent's state.

An immutable list of operations (``set``, ``merge``, ``append``, ``increment``, ``delete``,
``log_event``, ``send``), checked when built; the owning actor applies them through one
reducer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from actors._logging import get_logger
from actors._text import clean_text
from actors.context._events import is_custom_type
from actors.context._frozen import thaw
from actors.context._json import JsonDepthError, JsonError, json_copy
from actors.context._parts import (
    Content,
    ContentInput,
    InvalidContentError,
    coerce_content,
    content_json,
)
from actors.exceptions import InvalidUpdateError

__all__ = ["ContextUpdate", "LoggedEvent", "Operation", "PeerSend"]

_log = get_logger("actors.update")


@dataclass(frozen=True, slots=True)
class _Set:
    key: str
    value: Any
    op: Literal["set"] = "set"


@dataclass(frozen=True, slots=True)
class _Merge:
    key: str
    value: dict[str, Any]
    op: Literal["merge"] = "merge"


@dataclass(frozen=True, slots=True)
class _Append:
    key: str
    value: Any
    op: Literal["append"] = "append"


@dataclass(frozen=True, slots=True)
class _Increment:
    key: str
    value: int | float
    op: Literal["increment"] = "increment"


@dataclass(frozen=True, slots=True)
class _Delete:
    key: str
    op: Literal["delete"] = "delete"


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An event that a `ContextUpdate` asks its agent to append to the log.

    Checked when it is built, like every operation: a bad event fails in the tool that made
    it, and never reaches the log or the store.

    Attributes:
        type: A namespaced event type such as ``"app.note"``; names without a dot (``user_message``,
            ``suspended``, ...) belong to the framework and are refused.
        data: The payload: a mapping of plain JSON (copied, so later changes to the mapping
            passed in do not leak into the log).

    Raises:
        InvalidUpdateError: A type that is not namespaced, or data that is not a mapping of
            plain JSON (or nests more than 200 levels deep).
    """

    type: str
    data: dict[str, Any]
    op: Literal["log_event"] = "log_event"

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not is_custom_type(self.type):
            raise InvalidUpdateError(
                f"event type {self.type!r} cannot be logged by a tool: use a namespaced type such "
                "as 'app.note' (names without a dot belong to the framework; messages are added "
                "by the agent, not by log_event)"
            )
        if self.op != "log_event":
            raise InvalidUpdateError(f"a LoggedEvent's op is 'log_event', got {self.op!r}")
        if not isinstance(self.data, Mapping):
            raise InvalidUpdateError(
                f"the data of event {self.type!r} must be a mapping, got {type(self.data).__name__}"
            )
        try:
            data = json_copy(dict(self.data), f"the data of event {self.type!r}")
        except JsonDepthError as exc:
            raise InvalidUpdateError(str(exc)) from None
        except JsonError as exc:
            raise InvalidUpdateError(
                f"{exc}; event data is plain JSON (dict, list, str, int, float, bool, None)"
            ) from None
        object.__setattr__(self, "data", data)


@dataclass(frozen=True, slots=True)
class PeerSend:
    """A message that a `ContextUpdate` asks its agent to send to another agent, by id."""

    to: str
    content: Content
    op: Literal["send"] = "send"

    def __post_init__(self) -> None:
        # The text rule (`clean_text`): the content is logged by both agents and read by a model.
        # Parts were checked when they were made.
        to, content = self.to, self.content
        if type(content) is str and content.isascii() and type(to) is str and to.isascii():
            return  # every message of a simulation's ring passes here: the common case first
        if isinstance(to, str):
            object.__setattr__(self, "to", clean_text(to))
        if isinstance(content, str):
            object.__setattr__(self, "content", clean_text(content))


Operation: TypeAlias = _Set | _Merge | _Append | _Increment | _Delete | LoggedEvent | PeerSend

_OPERATION_TYPES = (_Set, _Merge, _Append, _Increment, _Delete, LoggedEvent, PeerSend)
_NOT_METADATA = (LoggedEvent, PeerSend)  # the operations that leave metadata alone


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidUpdateError(
            f"metadata keys must be non-empty strings, got {key!r}; use a str key such as 'notes'"
        )
    return key if key.isascii() else clean_text(key)


def _json(key: str, value: object) -> Any:
    try:
        return json_copy(value, f"value for key {key!r}")
    except JsonDepthError as exc:
        raise InvalidUpdateError(str(exc)) from None
    except JsonError as exc:
        raise InvalidUpdateError(
            f"{exc}; metadata holds plain JSON (dict, list, str, int, float, bool, None), "
            "so convert the value first (e.g. model.model_dump(mode='json'))"
        ) from None


class ContextUpdate:
    """An immutable list of changes that a tool asks its agent to make to its own context.

    Each builder method returns a new update, so calls chain; the operations apply in the order
    they were added. A tool returns the update (``return result, update``) and the agent that owns
    the context applies it, after the tool finished, through `fold` — the one place that defines
    what the operations mean:

    - ``set(key, value)`` replaces the value at ``key``;
    - ``merge(key, mapping)`` deep-merges ``mapping`` into the mapping at ``key``, at any depth; a
      missing key is created, and a value that is not a mapping is replaced;
    - ``append(key, item)`` appends to the list at ``key``; a missing key or None becomes
      ``[item]``; appending to anything else is an `InvalidUpdateError`;
    - ``increment(key, by=1)`` adds the number ``by`` to the number at ``key``; a missing key or
      None counts as 0; incrementing anything else is an `InvalidUpdateError`. Increments of
      one key commute, so parallel tool calls that each count something lose nothing;
    - ``delete(key)`` removes ``key``; deleting a missing key does nothing;
    - ``log_event(type, data)`` touches no metadata: it appends an event to the agent's log;
    - ``send(to, content)`` touches no metadata: the agent logs a ``message_sent`` event and,
      once the step is durable, its host delivers ``content`` to the agent ``to`` (a peer
      message; an unknown receiver makes the whole update fail for the tool). A receiver in a
      run gets it at that run's next step, not in a new turn.

    Keys are strings and values must be plain JSON; both are checked (and values copied) when the
    update is built, so a bad update fails in the tool, naming the key.

    Example:
        >>> update = ContextUpdate().append("notes", "a").merge("prefs", {"ui": {"dark": True}})
        >>> update.fold({"notes": ["z"], "prefs": {"ui": {"size": 2}}})
        {'notes': ['z', 'a'], 'prefs': {'ui': {'size': 2, 'dark': True}}}
    """

    __slots__ = ("_ops",)

    def __init__(self, operations: tuple[Operation, ...] = ()) -> None:
        if type(operations) is tuple:
            pass  # what the builder methods pass: checked below, op by op
        elif isinstance(operations, str | bytes) or not isinstance(operations, Iterable):
            raise InvalidUpdateError(
                f"ContextUpdate takes a tuple of operations, got {type(operations).__name__}; "
                "build updates with ContextUpdate().set(...), .merge(...), .append(...) and so on"
            )
        ops = tuple(operations)
        for op in ops:
            if not isinstance(op, _OPERATION_TYPES):
                raise InvalidUpdateError(
                    f"not an operation: {op!r}; build updates with set(), merge(), append(), "
                    "increment(), delete(), log_event() and send()"
                )
        self._ops: tuple[Operation, ...] = ops

    # -- building ---------------------------------------------------------------------------

    def set(self, key: str, value: Any) -> ContextUpdate:
        """Return a new update that also sets ``key`` to ``value``."""
        key = _check_key(key)
        return ContextUpdate((*self._ops, _Set(key, _json(key, value))))

    def merge(self, key: str, value: Mapping[str, Any]) -> ContextUpdate:
        """Return a new update that also deep-merges the mapping ``value`` into ``key``."""
        key = _check_key(key)
        if not isinstance(value, Mapping):
            raise InvalidUpdateError(
                f"merge into {key!r} needs a mapping, got {type(value).__name__}; "
                "use set() to replace a value"
            )
        return ContextUpdate((*self._ops, _Merge(key, _json(key, value))))

    def append(self, key: str, item: Any) -> ContextUpdate:
        """Return a new update that also appends ``item`` to the list at ``key``."""
        key = _check_key(key)
        return ContextUpdate((*self._ops, _Append(key, _json(key, item))))

    def increment(self, key: str, by: int | float = 1) -> ContextUpdate:
        """Return a new update that also adds ``by`` to the number at ``key``.

        A missing key or None counts as 0. Unlike ``set(key, snapshot_value + 1)``, increments
        of one key commute: three parallel calls that each increment a counter add 3, whatever
        the snapshot they read.

        Args:
            key: The metadata key holding a number.
            by: An int or a finite float (negative to decrement); not a bool.

        Raises:
            InvalidUpdateError: ``by`` is not an int or a finite float.
        """
        key = _check_key(key)
        if isinstance(by, bool) or not isinstance(by, int | float) or not _finite(by):
            raise InvalidUpdateError(
                f"increment of {key!r} needs an int or a finite float, got {by!r}"
            )
        return ContextUpdate((*self._ops, _Increment(key, by)))

    def delete(self, key: str) -> ContextUpdate:
        """Return a new update that also removes ``key`` (a missing key is no error)."""
        return ContextUpdate((*self._ops, _Delete(_check_key(key))))

    def log_event(self, type: str, data: Mapping[str, Any] | None = None) -> ContextUpdate:
        """Return a new update that also appends an event of ``type`` to the agent's log.

        Args:
            type: A namespaced event type such as ``"app.note"``; names without a dot belong to
                the framework.
            data: The event's payload, plain JSON.
        """
        return ContextUpdate((*self._ops, LoggedEvent(type, {} if data is None else data)))  # type: ignore[arg-type]

    def send(self, to: str, content: ContentInput) -> ContextUpdate:
        """Return a new update that also sends ``content`` to the agent ``to`` (a peer message).

        The agent logs the send (``message_sent``) with the step, and its host delivers the
        message once the step is written: the receiver logs ``message_received``, the content
        joins its transcript, and an idle receiver starts a turn (see ``Agent.on_message``).
        A receiver in a run does not start another turn: the content joins that run at its next
        step boundary (before its next model request); if the run ends first, it joins the
        transcript after the run and waits for the receiver's next run.

        Args:
            to: The receiving agent's id (any agent of the same host, not only a parent or a
                child).
            content: The message: text, or a sequence of parts (text, images, audio,
                documents), as a prompt takes.
        """
        if not isinstance(to, str) or not to:
            raise InvalidUpdateError(
                f"send() needs the receiver's agent id as a non-empty str, got {to!r}"
            )
        if not isinstance(content, str):
            try:
                content = coerce_content(content, "send()'s message")
            except InvalidContentError as exc:
                raise InvalidUpdateError(
                    f"{exc}; serialize structured content first (e.g. json.dumps)"
                ) from None
        return ContextUpdate((*self._ops, PeerSend(to, content)))

    # -- reading ----------------------------------------------------------------------------

    @property
    def operations(self) -> tuple[Operation, ...]:
        """The operations, in the order they apply."""
        return self._ops

    @property
    def events(self) -> tuple[LoggedEvent, ...]:
        """The ``log_event`` operations, in order."""
        return tuple(op for op in self._ops if isinstance(op, LoggedEvent))

    @property
    def sends(self) -> tuple[PeerSend, ...]:
        """The ``send`` operations (peer messages), in order."""
        return tuple(op for op in self._ops if isinstance(op, PeerSend))

    @property
    def touches_metadata(self) -> bool:
        """Whether any operation changes metadata."""
        return any(not isinstance(op, _NOT_METADATA) for op in self._ops)

    def __bool__(self) -> bool:
        return bool(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._ops)

    def __add__(self, other: object) -> ContextUpdate:
        if not isinstance(other, ContextUpdate):
            return NotImplemented
        return ContextUpdate(self._ops + other._ops)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ContextUpdate) and self._ops == other._ops

    def __hash__(self) -> int:
        return hash(repr(self._ops))

    def __repr__(self) -> str:
        return f"ContextUpdate({list(self.to_json())!r})"

    # -- the reducer ------------------------------------------------------------------------

    def fold(
        self, metadata: Mapping[str, Any], *, warn_dropped_events: bool = True
    ) -> dict[str, Any]:
        """Apply the metadata operations to ``metadata`` and return the new mapping.

        ``metadata`` itself is never changed: when an operation fails, the caller still holds the
        state as it was. Unchanged values are shared with the input, so never change the result
        in place; build another update instead.

        Args:
            metadata: The mapping to start from.
            warn_dropped_events: Log a warning naming the ``log_event`` types, which a bare
                mapping has no log to receive. The agent applies events itself and turns it off.

        Raises:
            InvalidUpdateError: ``append`` met a value that is not a list (or None), or
                ``increment`` one that is not a number (or None).
        """
        # A RunContext's snapshot is frozen (read-only mappings, tuples): thaw it so the result
        # is plain JSON and append sees its lists as lists.
        if not isinstance(metadata, Mapping):
            raise InvalidUpdateError(f"fold needs a mapping, got {type(metadata).__name__}")
        state = dict(metadata) if isinstance(metadata, dict) else thaw(metadata)
        for op in self._ops:
            if isinstance(op, _Set):
                state[op.key] = op.value
            elif isinstance(op, _Merge):
                state[op.key] = _deep_merge(state.get(op.key), op.value)
            elif isinstance(op, _Append):
                current = state.get(op.key)
                if current is None:
                    state[op.key] = [op.value]
                elif isinstance(current, list):
                    state[op.key] = [*current, op.value]
                else:
                    raise InvalidUpdateError(
                        f"cannot append to {op.key!r}: it holds a {type(current).__name__}, not a "
                        "list; set() it to a list first, or append to another key"
                    )
            elif isinstance(op, _Increment):
                state[op.key] = _incremented(op.key, state.get(op.key), op.value)
            elif isinstance(op, _Delete):
                state.pop(op.key, None)
            # log_event and send touch no metadata: the agent that applies the update appends
            # their events (`AgentContext.apply_update`).
        if warn_dropped_events and (dropped := self.events):
            _log.warning(
                "context update events dropped: no log to append them to",
                dropped_event_types=[event.type for event in dropped],
            )
        if warn_dropped_events and (unsent := self.sends):
            _log.warning(
                "context update messages dropped: no agent to send them",
                receivers=[send.to for send in unsent],
            )
        return state

    # -- wire form --------------------------------------------------------------------------

    def to_json(self) -> list[dict[str, Any]]:
        """The operations as plain JSON (how they are recorded in the log)."""
        out: list[dict[str, Any]] = []
        for op in self._ops:
            if isinstance(op, LoggedEvent):
                out.append({"op": "log_event", "type": op.type, "data": op.data})
            elif isinstance(op, PeerSend):
                out.append({"op": "send", "to": op.to, "content": content_json(op.content)})
            elif isinstance(op, _Delete):
                out.append({"op": "delete", "key": op.key})
            else:
                out.append({"op": op.op, "key": op.key, "value": op.value})
        return out

    @classmethod
    def from_json(cls, operations: object) -> ContextUpdate:
        """Rebuild an update from `to_json` output, validating it the same way."""
        if not isinstance(operations, list):
            raise InvalidUpdateError(f"operations must be a list, got {type(operations).__name__}")
        update = cls()
        for raw in operations:
            if not isinstance(raw, Mapping):
                raise InvalidUpdateError(f"an operation must be a mapping, got {raw!r}")
            op = raw.get("op")
            if op == "set":
                update = update.set(raw.get("key"), raw.get("value"))  # type: ignore[arg-type]
            elif op == "merge":
                update = update.merge(raw.get("key"), raw.get("value"))  # type: ignore[arg-type]
            elif op == "append":
                update = update.append(raw.get("key"), raw.get("value"))  # type: ignore[arg-type]
            elif op == "increment":
                update = update.increment(raw.get("key"), raw.get("value"))  # type: ignore[arg-type]
            elif op == "delete":
                update = update.delete(raw.get("key"))  # type: ignore[arg-type]
            elif op == "log_event":
                update = update.log_event(raw.get("type"), raw.get("data"))  # type: ignore[arg-type]
            elif op == "send":
                update = update.send(raw.get("to"), raw.get("content"))  # type: ignore[arg-type]
            else:
                raise InvalidUpdateError(
                    f"unknown operation {op!r}; expected set, merge, append, increment, delete, "
                    "log_event or send"
                )
        return update


def _finite(number: int | float) -> bool:
    # An int is always finite (and math.isfinite cannot take one past a float's range).
    return isinstance(number, int) or math.isfinite(number)


def _incremented(key: str, current: Any, by: int | float) -> int | float:
    if current is None:
        return by
    if isinstance(current, bool) or not isinstance(current, int | float):
        raise InvalidUpdateError(
            f"cannot increment {key!r}: it holds a {type(current).__name__}, not a number; "
            "set() it to a number first, or increment another key"
        )
    total = current + by
    if not _finite(total):
        raise InvalidUpdateError(f"incrementing {key!r} by {by!r} overflows ({total!r})")
    return total


def _deep_merge(current: Any, incoming: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(current, Mapping):
        return incoming
    merged = dict(current)
    for key, value in incoming.items():
        existing = merged.get(key)
        if isinstance(value, dict) and isinstance(existing, Mapping):
            merged[key] = _deep_merge(existing, value)
        else:
            merged[key] = value
    return merged
