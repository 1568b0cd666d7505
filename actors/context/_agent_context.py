"""`AgentContext`: the state one agent owns.

Its event log is the truth; the transcript (``messages``), metadata, usage and counters are
folded from it as events are appended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

from actors._logging import get_logger
from actors._text import clean_text
from actors.context._cancel import CancellationToken
from actors.context._event_log import (
    EventView,
    Record,
    event_at,
    event_of,
    materialize,
    publishing,
)
from actors.context._events import (
    BOOKKEEPING_TYPES,
    COMPACTED,
    REPLACE,
    SURFACE_TYPES,
    Clock,
    Event,
    is_custom_type,
    system_clock,
)
from actors.context._frozen import freeze
from actors.context._json import JsonError, json_copy
from actors.context._message_view import MessageView, new_log_id
from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    message_adapter,
)
from actors.context._parts import content_json
from actors.context._payloads import PayloadError, check_payload
from actors.context._read_only import read_only
from actors.context._run_context import (
    Delegator,
    RunContext,
    unchecked_run_context,
    with_delegator,
)
from actors.context._serialization import deserialize_context, serialize_context
from actors.context._suspension import Answer
from actors.context._update import ContextUpdate, LoggedEvent
from actors.context._usage import Usage, usage_of
from actors.exceptions import CorruptStoreError, InvalidUpdateError, UserError

__all__ = ["INTERRUPTED_NOT_STARTED", "AgentContext", "TranscriptEntry"]

_log = get_logger("actors.context")

INTERRUPTED_NOT_STARTED = "Tool call was interrupted and not executed. Please retry if needed."

_NO_TOOL_CONTEXT: Mapping[str, Any] = freeze({})

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)

_TYPE_OF_ROLE = {
    "system": "system_message",
    "user": "user_message",
    "assistant": "assistant_message",
    "tool": "tool_result",
}


class TranscriptEntry(NamedTuple):
    """One position of the transcript: the message, when it was first added, the event behind it."""

    message: Message
    created_at: datetime
    seq: int


EventListener = Callable[[Event], None]


class EventGate(Protocol):
    """What a host hands `AgentContext.set_gate`: whether it wants events, and since when."""

    epoch: int  # the `publishing` value ``wants`` was decided at
    wants: bool

    def on_append(self, context: AgentContext, seq: int) -> None: ...


class AgentContext:
    """The state one agent actor owns: its event log and everything projected from it.

    The log is the source of truth. Every other field — the ``messages`` of the transcript,
    ``metadata``, ``usage``, the iteration counter, the open suspensions — is a fold of the log,
    kept up to date incrementally as events are appended, so a context rebuilt from its events
    (`from_events`) equals the live one.

    Only the owning actor changes a context. Tools receive a `RunContext` (`run_context`) and
    change it only by returning a `ContextUpdate`, which the actor applies with `apply_update`.

    Args:
        agent_id: The agent's id.
        name: The agent's name (its spec's name); defaults to the id.
        parent_id: The parent agent's id, or None for a root.
        metadata: The initial metadata (plain JSON); recorded in the log as a ``context_update``.
        max_iterations: How many model requests one run may make.
        clock: Where event timestamps come from.
    """

    # The seqs of messages added with pin=True: a set of its own from the first pin on (most
    # contexts pin nothing, and an empty set per agent is 216 bytes).
    _pinned: frozenset[int] | set[int] = frozenset()
    # Where each appended event's place is noted (`_set_tap`): (log, tag), or None.
    _tap: tuple[list[Any], str] | None = None

    def __init__(
        self,
        agent_id: str = "agent",
        *,
        name: str | None = None,
        parent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        max_iterations: int = 50,
        clock: Clock = system_clock,
    ) -> None:
        if not isinstance(agent_id, str) or not agent_id:
            raise UserError(f"agent_id must be a non-empty string, got {agent_id!r}")
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise UserError(f"max_iterations must be a positive int, got {max_iterations!r}")
        for label, value in (("name", name), ("parent_id", parent_id)):
            if value is not None and not isinstance(value, str):
                raise UserError(f"{label} must be a string or None, got {value!r}")
        if not callable(clock):
            raise UserError(f"clock must be a function returning a datetime, got {clock!r}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise UserError(
                f"metadata must be a mapping of str keys to JSON values, got {metadata!r}"
            )
        self.agent_id = agent_id
        self.name = name or agent_id
        self.parent_id = parent_id
        self.max_iterations = max_iterations
        self._overlay: str | None = None
        self._clock = clock
        # The log: an `Event` or, until someone reads it, its record (see `_event_log`).
        self._events: list[Event | Record] = []
        self._first_lazy = 0  # every item before this index is an Event
        self._gate: EventGate | None = None  # the host's (`set_gate`)
        # The transcript's entries (see `entries`) as three parallel lists: no tuple per message
        # (a simulation keeps millions, and the collector scans every one it is given).
        self._created: list[datetime] = []  # each message's created_at
        self._seqs: list[int] = []  # the seq of the event behind each message
        # The messages alone, in a list that is only ever appended to: views share it (see
        # `MessageView`). A replace event swaps in a new list, and a new generation.
        self._messages: list[Message] = []
        self._log_id = new_log_id()
        self._generation = 0
        self._metadata: dict[str, Any] = {}
        self._frozen_metadata: Mapping[str, Any] | None = None
        # Usage is summed as four counts and built as a `Usage` when read (a hot path: every
        # model reply and tool call adds to it).
        self._used = (0, 0, 0, 0)  # requests, input tokens, output tokens, tool calls
        self._cached = (0, 0)  # input tokens read from and written to a provider's cache
        self._usage: Usage | None = Usage()
        self._iteration = 0
        self._needs_response = False
        self._run_id: str | None = None
        self._suspended: dict[str, dict[str, Any]] = {}
        self._answered_calls: set[str] = set()
        self._sent = 0  # peer messages this agent sent (numbers its next one)
        self._heard: dict[str, int] = {}  # sender id -> number of its latest message received
        # What a restore needs of the turns and children, folded so it reads no old events
        # (a context activated from a snapshot has not read them; see `_snapshot`).
        self._open_turn: str | None = None  # the run id of a turn started and not ended
        self._turn_seq = -1  # the seq of the last ``turn_start``
        self._turns = 0  # how many ``turn_start`` events
        self._budgeted = False  # whether the log holds budget events (see `actors.Budget`)
        self._spawned: dict[str, dict[str, Any]] = {}  # child id -> its first spawn's data
        self._kept_ids: set[str] = set()  # children spawned with ``keep``
        self._kept_names: dict[str, str] = {}  # subagent name -> its latest kept child's id
        self._children_spawned = 0  # spawns that were not a continuation
        # Events of seqs below this were not read yet (their places hold None): a context
        # activated from a snapshot reads them from its store on first need, with this.
        self._unread = 0
        self._read_unread: Callable[[int], Sequence[Event]] | None = None
        # A tuple, swapped on (un)subscribe: appending iterates it without copying it.
        self._listeners: tuple[EventListener, ...] = ()
        if metadata:
            update = ContextUpdate()
            for key, value in metadata.items():
                update = update.set(key, value)
            self.apply_update(update, source="initial")

    # -- reading ----------------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        """The whole log, in order.

        A context activated from a snapshot reads the events before it from its store the
        first time they are needed (here, `events_view` or `events_since` reaching them).
        """
        if self._unread:
            self._read_prefix()
        events = self._events
        size = len(events)
        if self._first_lazy < size:
            materialize(events, self._first_lazy, size)
            self._first_lazy = size
        return tuple(events[:size])  # type: ignore[arg-type]  # every item is an Event now

    @property
    def event_count(self) -> int:
        """How many events the log holds (the seq the next one gets)."""
        return len(self._events)

    def events_since(self, seq: int) -> tuple[Event, ...]:
        """The events from ``seq`` on (a run's events), at the cost of those alone."""
        return tuple(self.events_view(seq))

    def events_view(self, seq: int) -> EventView:
        """The events from ``seq`` on, as an immutable view read when it is looked at (O(1)).

        Events appended later do not show in it. What a `RunResult` holds as its ``events``.
        """
        events = self._events
        start = seq if seq >= 0 else max(len(events) + seq, 0)
        if start < self._unread:
            self._read_prefix()
        return EventView(events, start, len(events))

    def _event_at(self, seq: int) -> Event:
        """The event at ``seq``, made from its record if no one read it before."""
        if self._unread and (seq if seq >= 0 else len(self._events) + seq) < self._unread:
            self._read_prefix()
        return event_at(self._events, seq)

    def _read_prefix(self) -> None:
        """Read the events a snapshot stood for (seqs below `_unread`) from the store."""
        count, read = self._unread, self._read_unread
        if read is None:
            raise UserError(f"agent {self.agent_id!r}: the start of its log cannot be read")
        events = list(read(count))
        if len(events) != count or any(e.seq != i for i, e in enumerate(events)):
            raise CorruptStoreError(
                f"agent {self.agent_id!r}: its store gave {len(events)} events for the "
                f"{count} its snapshot stood for; the store changed under the session"
            )
        self._events[:count] = events
        self._unread, self._read_unread = 0, None

    def set_gate(self, gate: EventGate | None) -> None:
        """The host's hook: ``gate.on_append(context, seq)`` after an append, no `Event` made.

        It is called while ``gate.wants`` holds, and whenever what takes events may have
        changed (``gate.epoch`` is not `publishing`'s): a host that keeps, streams or traces
        events reads them with `_event_at`; one with nowhere to send them pays nothing.
        """
        self._gate = gate

    @property
    def messages(self) -> list[Message]:
        """The transcript: exactly the projection of the log (a new list each time)."""
        return list(self._messages)

    def message_view(self) -> MessageView:
        """The transcript as it stands, as an immutable view: O(1), whatever its length.

        Messages added later do not show in it; a view taken before a ``replace`` event keeps
        the messages it had.
        """
        return MessageView(
            self._messages, len(self._messages), origin=(self._log_id, self._generation)
        )

    @property
    def message_count(self) -> int:
        """How many messages the transcript holds."""
        return len(self._messages)

    @property
    def entries(self) -> tuple[TranscriptEntry, ...]:
        """The transcript with each message's ``created_at`` and the seq of its event."""
        return tuple(map(TranscriptEntry, self._messages, self._created, self._seqs))

    @property
    def metadata(self) -> dict[str, Any]:
        """The agent's dynamic metadata. Do not change it in place: apply a `ContextUpdate`."""
        return self._metadata

    @property
    def usage(self) -> Usage:
        """Everything this agent consumed, over all its runs."""
        usage = self._usage
        if usage is None:
            cached = self._cached
            if cached[0] or cached[1]:
                usage = self._usage = usage_of(*self._used, None, *cached)
            else:
                usage = self._usage = usage_of(*self._used)
        return usage

    @property
    def iteration(self) -> int:
        """How many model requests the current run has made."""
        return self._iteration

    @property
    def needs_response(self) -> bool:
        """Whether the model owes a reply (the last message is from the user or a tool)."""
        return self._needs_response

    @property
    def run_id(self) -> str | None:
        """The id of the current (or last) run."""
        return self._run_id

    @property
    def system_prompt(self) -> str | None:
        """The logged system prompt: the transcript's leading system message, or None.

        It is part of the log (a ``system_message`` event, written once when a fresh context
        starts its first run), so it is persisted and restored as it was. What the current code
        adds for the model is the overlay (`system_prompt_overlay`).
        """
        if self._messages:
            first = self._messages[0]
            if isinstance(first, SystemMessage):
                return first.content
        return None

    @property
    def system_prompt_overlay(self) -> str | None:
        """The system-prompt overlay (see `put_system_prompt_overlay`), or None."""
        return self._overlay

    @property
    def suspended(self) -> dict[str, dict[str, Any]]:
        """Open suspensions: request id to the data of its ``suspended`` event."""
        return dict(self._suspended)

    @property
    def last_message(self) -> Message | None:
        """The last message of the transcript, or None when it is empty."""
        return self._messages[-1] if self._messages else None

    @property
    def assistant_messages(self) -> list[AssistantMessage]:
        """Every assistant message of the transcript, in order."""
        return [m for m in self._messages if isinstance(m, AssistantMessage)]

    @property
    def sent_messages(self) -> int:
        """How many peer messages this agent has sent (``message_sent`` events)."""
        return self._sent

    def last_heard(self, sender: str) -> int:
        """The number of the latest peer message received from ``sender`` (0: none yet).

        A sender numbers its messages 1, 2, 3...; a message numbered at most this is a
        duplicate (a send delivered again after its sender was restored).
        """
        return self._heard.get(sender, 0)

    def max_iterations_reached(self) -> bool:
        """Whether the current run has made ``max_iterations`` model requests."""
        return self._iteration >= self.max_iterations

    def model_messages(self) -> MessageView:
        """The transcript as the model sees it: the system-prompt overlay applied.

        The overlay is appended to the transcript's leading system message (after a blank
        line), or becomes the leading system message when there is none. The log is unchanged.
        A leading system message that already ends with the overlay is left as it is (sessions
        logged by earlier versions hold their instructions there). An immutable view (see
        `message_view`): O(1), whatever the transcript's length.
        """
        view = self.message_view()
        overlay = self._overlay
        if not overlay:
            return view
        if self._messages and isinstance(self._messages[0], SystemMessage):
            logged = self._messages[0].content
            if logged.endswith(overlay):
                return view
            joined = f"{logged}\n\n{overlay}" if logged else overlay
            return view.with_head(SystemMessage(content=joined), replace_first=True)
        return view.with_head(SystemMessage(content=overlay), replace_first=False)

    # -- listening --------------------------------------------------------------------------

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener(event)`` after each event is appended; returns an unsubscribe."""
        if not callable(listener):
            raise UserError(f"a listener is a function taking an Event, got {listener!r}")
        self._listeners = (*self._listeners, listener)

        def unsubscribe() -> None:
            listeners = list(self._listeners)
            if listener in listeners:
                listeners.remove(listener)
                self._listeners = tuple(listeners)

        return unsubscribe

    def _set_tap(self, log: list[Any], tag: str) -> None:
        """Note each event appended from now on in ``log``, as ``(tag, items, seq)``.

        ``event_at(items, seq)`` (`actors.context._event_log`) is the event: a listener for a
        log that keeps every event in order and makes no `Event` until one is read (a
        simulation's). One tap per context; a new one replaces it.
        """
        self._tap = (log, tag)

    # -- the one place events enter ---------------------------------------------------------

    def _append(
        self,
        event_type: str,
        data: dict[str, Any],
        *,
        message: Message | None = None,
        update: ContextUpdate | None = None,
        usage: Usage | None = None,
    ) -> int:
        """Fold and append one event; returns its seq (`_event_at` gives the `Event`)."""
        now = self._clock()
        if type(now) is not datetime and not isinstance(now, datetime):
            raise UserError(f"the context's clock must return a datetime, got {now!r}")
        events = self._events
        seq = len(events)
        if event_type in _FOLDED:  # most of a step's events project to nothing: no fold
            self._fold(event_type, data, seq, now, message, update, usage)
        tap = self._tap
        if tap is not None:  # noted before any listener runs (one may append elsewhere)
            tap[0].append((tap[1], events, seq))
        listeners = self._listeners
        if listeners:
            event = event_of((seq, event_type, data, now))
            events.append(event)
            if self._first_lazy == seq:
                self._first_lazy = seq + 1
            for listener in listeners:  # a tuple: (un)subscribing meanwhile swaps it
                listener(event)
        else:
            # The hottest line of an agent (nine events a step): a record, no Event yet.
            events.append((seq, event_type, data, now))
        gate = self._gate
        if gate is not None and (gate.wants or gate.epoch != publishing.value):
            gate.on_append(self, seq)
        return seq

    def _apply(
        self,
        event: Event,
        *,
        message: Message | None = None,
        update: ContextUpdate | None = None,
        usage: Usage | None = None,
    ) -> None:
        """Fold one event into the projections. The single definition of what events mean.

        ``message``, ``update`` and ``usage`` are the event's payload already parsed (by the
        caller that built the data from them): they are folded instead of the data read again.
        """
        if event.type in _FOLDED:  # most events project to nothing: no fold
            self._fold(event.type, event.data, event.seq, event.created_at, message, update, usage)

    def _fold(
        self,
        kind: str,
        data: dict[str, Any],
        seq: int,
        created_at: datetime,
        message: Message | None,
        update: ContextUpdate | None,
        usage: Usage | None,
    ) -> None:
        """`_apply` for an event of a type that projects to something (in `_FOLDED`)."""
        if kind in SURFACE_TYPES:
            if message is None:  # read back from a log (the live path passes the message)
                message = _message_of(data)
                if data.get("pin") is True:
                    self._pin(seq)
            self._messages.append(message)
            self._created.append(created_at)
            self._seqs.append(seq)
            self._note_response(message)
        elif kind == "usage":
            if usage is None:
                usage = Usage(**data)  # read back from a log: validated
            requests, tokens_in, tokens_out, calls = self._used
            self._used = (  # all or nothing: a sum that raises changes nothing
                requests + usage.requests,
                tokens_in + usage.input_tokens,
                tokens_out + usage.output_tokens,
                calls + usage.tool_calls,
            )
            if usage.cache_read_tokens or usage.cache_write_tokens:
                read, written = self._cached
                self._cached = (
                    read + usage.cache_read_tokens,
                    written + usage.cache_write_tokens,
                )
            self._usage = None
        elif kind == "tool_call":
            requests, tokens_in, tokens_out, calls = self._used
            self._used = (requests, tokens_in, tokens_out, calls + 1)
            self._usage = None
        elif kind in _BUDGET_TYPES:
            self._budgeted = True  # a restore reads this log for its ledger; others need not
        elif kind in _BUDGET_CARRIERS:
            if "budget" in data:  # a budgeted request's reservation, or its settlement
                self._budgeted = True
        elif kind == "turn_start":
            self._iteration = 0
            self._run_id = data.get("run_id")
            self._open_turn = data.get("run_id", "")
            self._turn_seq = seq
            self._turns += 1
        elif kind == "turn_end":
            self._open_turn = None
        elif kind == "subagent_spawned":
            child_id = data["child_id"]
            self._spawned.setdefault(child_id, data)
            if not data.get("continued"):
                self._children_spawned += 1
            if data.get("keep"):
                self._kept_ids.add(child_id)
                self._kept_names[data["name"]] = child_id
        elif kind == "step_start":
            self._iteration = int(data.get("iteration", self._iteration + 1))
        elif kind == "context_update":
            if update is None:
                update = ContextUpdate.from_json(data["ops"])
            self._metadata = update.fold(self._metadata, warn_dropped_events=False)
            self._frozen_metadata = None
        elif kind == REPLACE:
            first, last = data["first"], data["last"]
            if message is None:
                message = message_adapter.validate_python(data["message"])
            if not (0 <= first <= last < len(self._messages)):
                _log.warning("replace event outside the transcript ignored", seq=seq)
                return
            touches_end = last == len(self._messages) - 1
            self._created[first : last + 1] = [self._created[first]]
            self._seqs[first : last + 1] = [seq]
            # Copy on write: views handed out before keep the list they read.
            self._messages = [*self._messages[:first], message, *self._messages[last + 1 :]]
            self._generation += 1
            if touches_end:
                self._note_response(message)
        elif kind == COMPACTED:
            self._fold_compacted(data, seq, message)
        elif kind == "suspended":
            request_id, _ = data["request"]["id"], data["tool_call"]["id"]
            self._suspended[request_id] = data
        elif kind == "resumed":
            self._suspended.pop(data.get("request_id", ""), None)
        elif kind == "message_sent":
            self._sent = max(self._sent, int(data["n"]))
        elif kind == "message_received":
            sender, number = data["from"], int(data["n"])
            if number > self._heard.get(sender, 0):
                self._heard[sender] = number

    def _fold_compacted(self, data: dict[str, Any], seq: int, summary: Message | None) -> None:
        """A ``compacted`` event: the summary, then the range's kept messages, take its place."""
        first, last = data["first"], data["last"]
        kept: list[int] = data.get("kept") or []
        if summary is None:
            summary = message_adapter.validate_python(data["message"])
        messages = self._messages
        if not (0 <= first <= last < len(messages)) or any(not first <= k <= last for k in kept):
            _log.warning("compacted event outside the transcript ignored", seq=seq)
            return
        created, seqs = self._created, self._seqs
        self._created = [
            *created[:first],
            created[first],
            *[created[k] for k in kept],
            *created[last + 1 :],
        ]
        self._seqs = [*seqs[:first], seq, *[seqs[k] for k in kept], *seqs[last + 1 :]]
        # Copy on write, as for a replace: views handed out before keep the list they read.
        self._messages = [
            *messages[:first],
            summary,
            *[messages[k] for k in kept],
            *messages[last + 1 :],
        ]
        self._generation += 1
        if last == len(messages) - 1:
            self._note_response(self._messages[first + len(kept)])

    def _note_response(self, message: Message) -> None:
        kind = type(message)
        if kind is UserMessage or kind is ToolResultMessage:  # the common cases, checked first
            self._needs_response = True
        elif isinstance(message, AssistantMessage):
            if not message.tool_calls:
                self._needs_response = False
        elif not isinstance(message, SystemMessage):  # a user message or a tool result
            self._needs_response = True

    # -- writing ----------------------------------------------------------------------------

    def add_message(
        self, message: Message, source: str | None = None, *, pin: bool = False
    ) -> Event:
        """Append a message to the transcript (and its event to the log).

        Args:
            message: The message.
            source: Marks injected context (e.g. ``"memory"``); recorded in the event's data,
                not in the projected message.
            pin: Keep the message in view through compaction (an agent's ``compaction``
                summarises older messages, never a pinned one). Recorded in the event's data.
        """
        if pin is not False:
            if pin is not True:
                raise UserError(f"pin must be a bool, got {pin!r}")
            return self._event_at(self._add_message(message, source, pin=True))
        return self._event_at(self._add_message(message, source))

    @property
    def pinned_seqs(self) -> frozenset[int]:
        """The seqs of the events of messages added with ``pin=True``."""
        return frozenset(self._pinned)

    def _add_message(self, message: Message, source: str | None = None, pin: bool = False) -> int:
        """`add_message` without making the `Event` (the agent loop's): returns its seq."""
        if not isinstance(message, _MESSAGE_TYPES):
            raise UserError(
                f"add_message takes a message (UserMessage, AssistantMessage, ...), "
                f"got {type(message).__name__}"
            )
        if source is not None:
            _check_source(source)
        data = _data_of(message)
        if source is not None:
            data["source"] = source
        if not pin:
            return self._append(_TYPE_OF_ROLE[message.role], data, message=message)
        data["pin"] = True
        seq = self._append(_TYPE_OF_ROLE[message.role], data, message=message)
        self._pin(seq)
        return seq

    def _pin(self, seq: int) -> None:
        pinned = self._pinned
        if isinstance(pinned, frozenset):
            pinned = self._pinned = set(pinned)
        pinned.add(seq)

    def add_messages(self, messages: Iterable[Message], source: str | None = None) -> list[Event]:
        """Append several messages, in order."""
        batch = list(messages)
        for message in batch:  # validate all first: a bad one leaves the context unchanged
            if not isinstance(message, _MESSAGE_TYPES):
                raise UserError(f"add_messages takes messages, got {type(message).__name__}")
        _check_source(source)
        return [self.add_message(message, source) for message in batch]

    def add_tool_call(self, call: ToolCall, **data: Any) -> Event:
        """Record that a tool call is being executed (counts toward ``usage.tool_calls``)."""
        if not isinstance(call, ToolCall):
            raise UserError(f"add_tool_call takes a ToolCall, got {type(call).__name__}")
        payload = {**_plain(data, "tool_call data"), "tool_call_id": call.id, "name": call.name}
        payload["arguments"] = json_copy(call.arguments)
        return self._event_at(self._append("tool_call", payload))

    def add_usage(self, usage: Usage) -> Event | None:
        """Add a model request's usage to the agent's (recorded as a ``usage`` event)."""
        seq = self._add_usage(usage)
        return None if seq is None else self._event_at(seq)

    def _add_usage(self, usage: Usage) -> int | None:
        """`add_usage` without making the `Event` (the agent loop's): returns its seq."""
        if not isinstance(usage, Usage):
            raise UserError(f"add_usage takes a Usage, got {type(usage).__name__}")
        requests, tokens_in, tokens_out, calls = (
            usage.requests,
            usage.input_tokens,
            usage.output_tokens,
            usage.tool_calls,
        )
        read, written = usage.cache_read_tokens, usage.cache_write_tokens
        if not (requests or tokens_in or tokens_out or calls or read or written):
            return None
        # The data is what ``usage.model_dump()`` gives, built directly (a hot path).
        data = {
            "requests": requests,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "tool_calls": calls,
        }
        if read:
            data["cache_read_tokens"] = read
        if written:
            data["cache_write_tokens"] = written
        return self._append("usage", data, usage=usage)

    def log_event(self, event_type: str, data: Mapping[str, Any] | None = None) -> Event | None:
        """Append a bookkeeping event (one that projects to no message).

        Surface types are refused with a warning and the context is unchanged: messages enter
        through `add_message`.

        Raises:
            UserError: an unknown type (user types are namespaced, like ``app.note``), data that
                is not plain JSON, or a framework event whose payload cannot be read. Nothing
                is appended.
        """
        if not isinstance(event_type, str):
            raise UserError(f"an event type is a string, got {event_type!r}")
        if event_type in SURFACE_TYPES or event_type in (REPLACE, COMPACTED):
            _log.warning(
                "log_event refused a message event; use add_message", event_type=event_type
            )
            return None
        if event_type not in BOOKKEEPING_TYPES and not is_custom_type(event_type):
            raise UserError(
                f"unknown event type {event_type!r}: framework types are "
                f"{sorted(BOOKKEEPING_TYPES)}; user types are namespaced, such as 'app.note'"
            )
        payload = _plain(data or {}, f"the data of event {event_type!r}")
        try:
            # The checks a log read back gets: what is appended here can always be restored.
            check_payload(event_type, payload)
            return self._event_at(self._append(event_type, payload))
        except (KeyError, TypeError, ValueError) as exc:
            # _apply folds before the event is stored, so a payload it cannot read changes nothing.
            detail = str(exc) if isinstance(exc, PayloadError | UserError) else repr(exc)
            raise UserError(
                f"event {event_type!r} has a malformed payload ({detail}); "
                "framework events carry the fields the framework writes"
            ) from None

    # Append a framework bookkeeping event built by the runtime itself. The agent loop's own
    # events are plain JSON by construction, so the checks of `log_event` (which guard data
    # coming from users) are skipped on this hot path: it is `_append` under a second name.
    _record = _append

    def apply_update(self, update: ContextUpdate, *, source: str | None = None) -> list[Event]:
        """Apply a tool's `ContextUpdate`: metadata operations first, then its events in order.

        Its peer messages (``send``) come last, each logged as a ``message_sent`` event
        numbered after the agent's previous sends; the host delivers them (the caller reads
        them from the returned events). If an operation fails the context is left exactly as
        it was.

        Raises:
            InvalidUpdateError: an operation cannot apply (e.g. ``append`` to a non-list).
        """
        if not isinstance(update, ContextUpdate):
            raise InvalidUpdateError(f"expected a ContextUpdate, got {type(update).__name__}")
        _check_source(source)
        # Checked and copied again: whoever built the update may still hold its events' data.
        logged = [LoggedEvent(event.type, event.data) for event in update.events]
        appended: list[int] = []
        if update.touches_metadata:
            metadata_ops = ContextUpdate(
                tuple(op for op in update.operations if op.op not in ("log_event", "send"))
            )
            metadata_ops.fold(self._metadata, warn_dropped_events=False)  # raises before logging
            data: dict[str, Any] = {"ops": metadata_ops.to_json()}
            if source is not None:
                data["source"] = source
            appended.append(self._append("context_update", data, update=metadata_ops))
        for event in logged:
            appended.append(self._append(event.type, event.data))
        for send in update.sends:
            number = self._sent + 1
            data = {
                "message_id": f"{self.agent_id}:{number}",
                "n": number,
                "to": send.to,
                "content": content_json(send.content),
            }
            appended.append(self._append("message_sent", data))
        return [self._event_at(seq) for seq in appended]

    def replace_message(self, index: int, message: Message) -> Event | None:
        """Shadow the message at ``index`` with ``message`` (the old event stays in the log).

        An index outside the transcript does nothing but log a warning.
        """
        return self.replace_message_range(index, index, message)

    def replace_message_range(self, first: int, last: int, message: Message) -> Event | None:
        """Shadow the messages at positions ``first..last`` (inclusive) with one message.

        Non-destructive: the shadowed events remain in the log. The replacement takes the range's
        position and the first shadowed message's ``created_at``. A range outside the transcript
        does nothing but log a warning.
        """
        if not isinstance(message, _MESSAGE_TYPES):
            raise UserError(f"replacement must be a message, got {type(message).__name__}")
        for label, value in (("first", first), ("last", last)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"{label} must be an int message position, got {value!r}")
        size = len(self._messages)
        if not 0 <= first <= last < size:
            _log.warning(
                "replace outside the transcript ignored", first=first, last=last, size=size
            )
            return None
        data = {"first": first, "last": last, "message": message.model_dump(mode="json")}
        return self._event_at(self._append(REPLACE, data, message=message))

    def compact(
        self,
        first: int,
        last: int,
        summary: Message,
        *,
        kept: Sequence[int] = (),
        info: Mapping[str, Any] | None = None,
    ) -> Event:
        """Shadow positions ``first..last`` with ``summary``, keeping the positions ``kept``.

        Non-destructive, like `replace_message_range`: the shadowed events stay in the log. The
        transcript becomes the messages before ``first``, the summary, the kept messages of the
        range (in order), then the messages after ``last``. ``info`` (plain JSON) is recorded in
        the ``compacted`` event's data beside the range.

        Raises:
            UserError: the range or a kept position is outside the transcript, or ``summary``
                is not a message.
        """
        if not isinstance(summary, _MESSAGE_TYPES):
            raise UserError(f"a summary must be a message, got {type(summary).__name__}")
        size = len(self._messages)
        positions = list(kept)
        if not (0 <= first <= last < size) or any(
            type(k) is not int or not first < k <= last for k in positions
        ):
            raise UserError(
                f"compact({first}, {last}, kept={positions}) is outside the transcript of "
                f"{size} messages"
            )
        data: dict[str, Any] = dict(_plain(info or {}, "compaction info"))
        data.update(first=first, last=last, kept=positions, message=_data_of(summary))
        return self._event_at(self._append(COMPACTED, data, message=summary))

    def put_system_prompt_overlay(self, overlay: str | None) -> None:
        """Put (or, with None, remove) the system-prompt overlay: never logged, never persisted.

        The overlay is what `model_messages` adds to the logged system prompt for the model;
        putting one replaces the one before. An agent puts its ``instructions`` here before
        every model request, so they follow the code that runs, not the code that started the
        session. To log a system prompt instead, add a `SystemMessage` to a fresh context.

        Raises:
            UserError: ``overlay`` is not a string or None.
        """
        if overlay is not None and not isinstance(overlay, str):
            raise UserError(f"the system-prompt overlay must be a string or None, got {overlay!r}")
        if overlay and not overlay.isascii():  # the text rule: it is sent with every request
            overlay = clean_text(overlay)
        self._overlay = overlay or None

    def increment_iteration(self, **data: Any) -> Event:
        """Count one more model request of this run (a ``step_start`` event)."""
        payload = _plain(data, "step_start data")
        return self._event_at(
            self._append("step_start", {**payload, "iteration": self._iteration + 1})
        )

    def dangling_tool_calls(self) -> list[ToolCall]:
        """Tool calls of the transcript that have no result and are not suspended."""
        answered = {m.tool_call_id for m in self.messages if isinstance(m, ToolResultMessage)}
        parked = {data["tool_call"]["id"] for data in self._suspended.values()}
        return [
            call
            for message in self.assistant_messages
            for call in message.tool_calls
            if call.id not in answered and call.id not in parked
        ]

    def patch_dangling_tool_calls(
        self, content: Callable[[ToolCall], str] | None = None
    ) -> list[ToolCall]:
        """Give every tool call without a result a synthetic error result. Idempotent.

        Args:
            content: The result text for a call; by default it says the call was interrupted
                and not executed.

        Returns:
            The calls that were patched.
        """
        dangling = self.dangling_tool_calls()
        # Build every result before adding any: a failing ``content`` leaves the context as it was.
        results = [
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=content(call) if content else INTERRUPTED_NOT_STARTED,
                is_error=True,
            )
            for call in dangling
        ]
        self.add_messages(results, source="recovery")
        return dangling

    # -- tools ------------------------------------------------------------------------------

    def metadata_snapshot(self) -> Mapping[str, Any]:
        """A deep, read-only copy of the metadata, as tools see it.

        Taken once per change of the metadata and shared: it is read-only all the way down.
        """
        if self._frozen_metadata is None:
            self._frozen_metadata = freeze(self._metadata)
        return self._frozen_metadata

    def run_context(
        self,
        call: ToolCall,
        *,
        tool_context: Any = None,
        metadata: Mapping[str, Any] | None = None,
        retry: int = 0,
        timeout: float | None = None,
        cancellation: CancellationToken | None = None,
        answer: Answer | None = None,
        delegator: Delegator | None = None,
    ) -> RunContext[Any]:
        """Build the `RunContext` that a tool executing ``call`` receives.

        Args:
            call: The tool call.
            tool_context: The static channel: a mapping is handed over as a deep read-only view
                of it (writes raise `ToolContextReadOnlyError`), anything else as it is.
            metadata: A snapshot from `metadata_snapshot` to share among the calls of a step;
                taken now when omitted.
            retry: The tool's retry count.
            timeout: The tool's timeout in seconds.
            cancellation: The call's cancellation token; a new one when omitted.
            answer: The answer when the call resumes a suspension.
            delegator: How the tool hands tasks to child agents (set by the runtime).
        """
        if not isinstance(call, ToolCall):
            raise UserError(f"run_context takes a ToolCall, got {type(call).__name__}")
        ctx = unchecked_run_context(
            read_only(tool_context) if tool_context is not None else _NO_TOOL_CONTEXT,
            metadata if metadata is not None else self.metadata_snapshot(),
            self.agent_id,
            self.parent_id,
            self._run_id or "",
            call.id,
            call.name,
            retry,
            self.usage,
            timeout,
            cancellation or CancellationToken(),
            answer,
        )
        return ctx if delegator is None else with_delegator(ctx, delegator)

    # -- rebuilding -------------------------------------------------------------------------

    @classmethod
    def from_events(
        cls,
        events: Sequence[Event],
        *,
        agent_id: str = "agent",
        name: str | None = None,
        parent_id: str | None = None,
        max_iterations: int = 50,
        clock: Clock = system_clock,
        parsed_payloads: Mapping[int, tuple[Message | None, ContextUpdate | None]] | None = None,
    ) -> AgentContext:
        """Rebuild a context by folding ``events`` from scratch.

        ``parsed_payloads`` (by index) lets a reader that already validated an event's message
        or update hand it over instead of having it parsed twice.

        Raises:
            UserError: an item is not an `Event`, or an event's payload cannot be folded.
        """
        ctx = cls(
            agent_id,
            name=name,
            parent_id=parent_id,
            max_iterations=max_iterations,
            clock=clock,
        )
        for index, event in enumerate(events):
            if not isinstance(event, Event):
                raise UserError(f"from_events takes Events, got {type(event).__name__} at {index}")
            parsed = parsed_payloads.get(index) if parsed_payloads else None
            try:
                if parsed is None:
                    ctx._apply(event)
                else:
                    ctx._apply(event, message=parsed[0], update=parsed[1])
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(
                    f"event {index} ({event.type}) has a malformed payload: {exc!r}"
                ) from None
            ctx._events.append(event)
        ctx._first_lazy = len(ctx._events)
        return ctx

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message],
        *,
        metadata: Mapping[str, Any],
        usage: Usage,
        clock: Clock = system_clock,
        **common: Any,
    ) -> AgentContext:
        """A new log seeded with ``messages``, ``metadata`` and ``usage`` (version 1 blobs).

        Version 1 kept no timestamps: every seeded event is stamped with a reading of ``clock``.
        """
        ctx = cls(metadata=metadata, clock=clock, **common)
        ctx.add_messages(messages, source=None)
        if usage != Usage():
            ctx.add_usage(usage.model_copy(update={"tool_calls": usage.tool_calls}))
        return ctx

    def serialize(self) -> dict[str, Any]:
        """A JSON-encodable snapshot (format version 2). Never contains ``tool_context``."""
        return serialize_context(self)

    @classmethod
    def deserialize(cls, blob: Mapping[str, Any], *, clock: Clock = system_clock) -> AgentContext:
        """Rebuild a context from `serialize` output (version 2) or a version 1 message list.

        Version 2 rebuilds the log and folds it again; an event of an unknown type is dropped
        and a gap in ``seq`` is logged, both as warnings. Version 1 kept no timestamps: its
        messages (and metadata, usage) are seeded into a new log stamped with the restore time,
        read from ``clock``, which also stamps every later event.

        Raises:
            SerializationError: an unknown version or a malformed blob, naming what is wrong.
        """
        return deserialize_context(
            blob, clock=clock, from_events=cls.from_events, from_messages=cls.from_messages
        )

    def __repr__(self) -> str:
        return (
            f"<AgentContext {self.agent_id!r} messages={len(self._messages)} "
            f"events={len(self._events)} iteration={self._iteration}>"
        )


def _check_source(source: object) -> None:
    if source is not None and not isinstance(source, str):
        raise UserError(f"source must be a string such as 'memory', or None; got {source!r}")


def _plain(data: object, what: str) -> dict[str, Any]:
    """A JSON copy of event data, so the log never holds a caller's objects."""
    if not isinstance(data, Mapping):
        raise UserError(f"{what} must be a mapping, got {data!r}")
    try:
        return json_copy(data, what)  # type: ignore[no-any-return]
    except JsonError as exc:
        raise UserError(f"{exc}; event data is plain JSON (dict, list, str, numbers)") from None


def _data_of(message: Message) -> dict[str, Any]:
    """An event's data for ``message``: what ``message.model_dump(mode="json")`` gives.

    Built directly for the framework's own message classes (every message of a step passes
    here); a tool call's arguments are plain JSON already (`ToolCall` copies them so) and are
    shared with the call, as the ``tool_call`` event shares them. A subclass of a message is
    dumped by pydantic.
    """
    kind = type(message)
    if kind is UserMessage or kind is SystemMessage:
        content = cast("UserMessage", message).content
        if type(content) is not str:
            return message.model_dump(mode="json")
        return {"role": message.role, "content": content}
    if kind is ToolResultMessage:
        result = cast("ToolResultMessage", message)
        if type(result.content) is not str:
            return message.model_dump(mode="json")
        return {
            "role": "tool",
            "tool_call_id": result.tool_call_id,
            "tool_name": result.tool_name,
            "content": result.content,
            "is_error": result.is_error,
        }
    if kind is AssistantMessage:
        reply = cast("AssistantMessage", message)
        # pydantic dumps a call by the field's type (`ToolCall`), whatever its class: so here.
        return {
            "role": "assistant",
            "content": reply.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
            ],
        }
    return message.model_dump(mode="json")


def _message_of(data: Mapping[str, Any]) -> Message:
    if "source" in data or "pin" in data:
        data = {key: value for key, value in data.items() if key != "source" and key != "pin"}
    return message_adapter.validate_python(data)


_BUDGET_TYPES = frozenset({"budget_set", "budget_reserved", "budget_settled"})
# Events a step writes anyway, which carry a budgeted request's reservation (request_header)
# and settlement (step_end) as ``budget``; budget_reserved is the first format's.
_BUDGET_CARRIERS = frozenset({"request_header", "step_end"})

_FOLDED = SURFACE_TYPES | {
    "usage",
    "tool_call",
    "turn_start",
    "turn_end",
    "subagent_spawned",
    "step_start",
    "context_update",
    REPLACE,
    COMPACTED,
    "suspended",
    "resumed",
    "message_sent",
    "message_received",
    "budget_set",
    "budget_reserved",
    "budget_settled",
    *_BUDGET_CARRIERS,
}
"""The event types `_fold` projects (one branch each); every other event folds into nothing."""
