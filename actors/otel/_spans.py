"""Spans from the event log: which events open, annotate and close which spans.

One `AgentSpans` reads one agent's events in order and keeps its open spans: the run
(``invoke_agent``, from ``turn_start`` to ``turn_end``), the model request (``chat``, from
``step_start`` to ``step_end``) and each tool or subagent call (``execute_tool``, from its
``tool_call``, ``subagent_spawned`` or ``suspended`` event to its ``tool_result``); which event
does what is in `actors.otel._reading`. Every span
is timed by its events' ``created_at``, so spans are the same on every host and can be made
from a stored log after the fact. A `TreeSpans` holds the agents of one tree and passes each
child the context of the call that started it, so one trace covers the tree.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from actors.otel import _semconv as sc
from actors.otel._content import Transcript, as_json

__all__ = ["ROOT", "AgentInfo", "AgentSpans", "TreeSpans", "ns"]

ROOT = Context()
"""The empty context: a root agent's run starts a trace of its own, on every host alike."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly (a naive datetime is read as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND * 1000


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What the spans of one agent say about it."""

    agent_id: str
    name: str
    parent_id: str | None
    session_id: str | None
    instructions: str | None = None  # static instructions, recorded only with content


class TreeSpans:
    """The spans being built for one tree of agents (a live `Tree`, or a stored session)."""

    __slots__ = ("agents", "capture", "latest", "lock", "owner", "queued", "tracer")

    def __init__(self, tracer: Tracer, capture: bool, owner: object = None) -> None:
        self.tracer = tracer
        self.capture = capture
        self.owner = owner
        self.agents: dict[str, AgentSpans] = {}
        # A child's runs start under the calls that gave it work, one call per run (a kept
        # child gets several); a run continued after a wake goes under the latest.
        self.queued: dict[str, deque[Context]] = {}
        self.latest: dict[str, Context] = {}
        self.lock = threading.Lock()

    def agent(self, info: AgentInfo) -> AgentSpans:
        """The spans of the agent ``info`` names (made on first use)."""
        spans = self.agents.get(info.agent_id)
        if spans is None:
            with self.lock:
                spans = self.agents.setdefault(info.agent_id, AgentSpans(self, info))
        return spans

    def hand_to_child(self, child_id: str, context: Context, *, run: bool = True) -> None:
        """The child's next run (or, with ``run=False``, its continued one) goes under it."""
        with self.lock:
            if run:
                self.queued.setdefault(child_id, deque()).append(context)
            self.latest[child_id] = context

    def forget(self, agent_id: str) -> None:
        """The agent left memory: drop what was kept for its runs (a long-lived root's tree)."""
        with self.lock:
            self.queued.pop(agent_id, None)
            self.latest.pop(agent_id, None)

    def parent_of(self, child_id: str, *, run: bool = True) -> Context:
        """The context a child's new (or continued) run starts in."""
        with self.lock:
            queue = self.queued.get(child_id) if run else None
            if queue:
                context = queue.popleft()
                if not queue:
                    del self.queued[child_id]
                return context
            return self.latest.get(child_id, ROOT)


@dataclass(slots=True)
class _Open:
    """A span being built, with what a continuation needs to open it again."""

    span: Span
    start: int
    context: Context
    name: str = ""
    child_id: str | None = None
    failure: tuple[str, str] | None = None  # a subagent call's child failed: (type, detail)


@dataclass(slots=True)
class _Paused:
    """A run cut off (its agent went to sleep): what to open again when it wakes."""

    run_id: str | None
    calls: dict[str, tuple[str, str | None]] = field(default_factory=dict)


class AgentSpans:
    """One agent's spans, built from its events in log order."""

    def __init__(self, tree: TreeSpans, info: AgentInfo) -> None:
        self.tree = tree
        self.info = info
        self.tracer: Tracer = tree.tracer
        self.replaying = False  # reading a restored log: no spans, no hand-offs
        self.transcript = Transcript() if tree.capture else None
        self.run: _Open | None = None
        self.run_id: str | None = None
        self.prompt_seen = False
        self.output: dict[str, Any] | None = None
        self.usage = [0, 0, 0, 0]
        self.model: tuple[str, str | None] | None = None
        self.error: tuple[str, str] | None = None
        self.cancel_reason = ""
        self.chat: _Open | None = None
        self.chat_usage = [0, 0, 0, 0]
        self.step_start: int | None = None
        self.calls: dict[str, _Open] = {}
        self.child_calls: dict[str, str] = {}  # subagent call's child id -> call id
        self.requests: dict[str, str] = {}  # open request id -> call id
        self.paused: _Paused | None = None
        self.woke_at: int | None = None
        self.last = 0

    def release(self, at: int, how: str, status: str) -> None:
        """The agent left memory with a run open (stopped, or its host shut down)."""
        if self.run is None:
            return
        self.run.span.add_event(
            "actors.released", {"actors.how": how, "actors.status": status}, timestamp=at
        )
        if status == "suspended":  # it stays suspended in its store
            self.end_run(at, "suspended", None, None)
        else:
            detail = f"agent {self.info.agent_id!r} {how} before its run finished"
            self.end_run(at, how, "AgentStoppedError", detail)

    # -- runs ---------------------------------------------------------------------------------

    def start_run(self, at: int, run_id: str | None, *, continued: bool = False) -> None:
        """Open the agent's ``invoke_agent`` span."""
        info = self.info
        if info.parent_id is None or self.replaying:
            parent = ROOT
        else:
            parent = self.tree.parent_of(info.agent_id, run=not continued)
        attributes: dict[str, Any] = {
            sc.OPERATION: "invoke_agent",
            sc.AGENT_NAME: info.name,
            sc.AGENT_ID: info.agent_id,
        }
        if info.session_id:
            attributes[sc.CONVERSATION_ID] = info.session_id
        if run_id:
            attributes[sc.ACTORS_RUN_ID] = run_id
        if info.parent_id:
            attributes[sc.ACTORS_PARENT_ID] = info.parent_id
        if continued:
            attributes[sc.ACTORS_RUN_CONTINUED] = True
        span = self.tracer.start_span(
            f"invoke_agent {info.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=at,
        )
        self.run = _Open(span, at, trace.set_span_in_context(span, ROOT))
        self.run_id = run_id
        self.prompt_seen = continued
        self.output, self.error, self.cancel_reason = None, None, ""
        self.usage = [0, 0, 0, 0]
        self.model = None

    def ensure_run(self, at: int) -> _Open:
        """The open run, or one continued here (tracing began in the middle of a run)."""
        if self.run is None:
            self.start_run(at, self.paused.run_id if self.paused else None, continued=True)
            self.paused = None
        assert self.run is not None
        return self.run

    def end_run(self, at: int, outcome: str, error_type: str | None, detail: str | None) -> None:
        """Close the run span and whatever it still holds open."""
        run = self.run
        if run is None:
            return
        status = Status(StatusCode.ERROR, detail) if error_type is not None else None
        self.end_chat(at, status, error_type)
        for call_id in list(self.calls):
            self.end_call(call_id, at, status, error_type)
        span = run.span
        attributes: dict[str, Any] = {
            sc.ACTORS_RUN_OUTCOME: outcome,
            **sc.usage_attributes(self.usage),
        }
        if self.model is not None:
            attributes[sc.REQUEST_MODEL] = self.model[0]
            if self.model[1]:
                attributes[sc.PROVIDER] = self.model[1]
        if self.transcript is not None and self.output is not None and outcome == "completed":
            attributes[sc.OUTPUT_MESSAGES] = as_json([self.output])
        span.set_attributes(attributes)
        _fail(span, status, error_type)
        span.end(end_time=max(at, run.start))
        self.run = None

    def pause(self, at: int, how: str) -> None:
        """End every open span now, remembering the run and its calls to continue them later."""
        if self.run is None:
            return
        calls = {call_id: (call.name, call.child_id) for call_id, call in self.calls.items()}
        if how:
            self.run.span.add_event(f"actors.{how}", timestamp=at)
        self.end_run(at, how or "paused", None, None)
        self.paused = _Paused(self.run_id, calls)

    def continue_run(self, at: int) -> None:
        """Open the paused run again, with its open calls (their children continue under them)."""
        paused, self.paused = self.paused, None
        if paused is None:
            return
        self.start_run(at, paused.run_id, continued=True)
        for call_id, (name, child_id) in paused.calls.items():
            self.open_call(call_id, name, at, child_id=child_id, continued=True)

    # -- model requests -----------------------------------------------------------------------

    def open_chat(self, at: int, model_name: str | None, settings: object) -> _Open:
        """Open the ``chat`` span of the current step."""
        run = self.ensure_run(at)
        start = self.step_start if self.step_start is not None else at
        self.step_start = None
        attributes: dict[str, Any] = {sc.OPERATION: "chat"}
        name = "chat"
        if model_name:
            model, provider = sc.model_and_provider(model_name)
            name = f"chat {model}"
            attributes[sc.REQUEST_MODEL] = model
            if provider:
                attributes[sc.PROVIDER] = provider
            self.model = (model, provider)  # the run's, set when it ends
        if self.info.session_id:
            attributes[sc.CONVERSATION_ID] = self.info.session_id
        if isinstance(settings, dict):
            for key, attribute in sc.SETTINGS.items():
                value = settings.get(key)
                if isinstance(value, int | float | str) or (
                    isinstance(value, list) and all(isinstance(v, str) for v in value)
                ):
                    attributes[attribute] = value
        if self.transcript is not None:
            attributes[sc.INPUT_MESSAGES] = as_json(self.transcript.messages)
            if self.info.instructions:
                text = [{"type": "text", "content": self.info.instructions}]
                attributes[sc.SYSTEM_INSTRUCTIONS] = as_json(text)
        span = self.tracer.start_span(
            name, context=run.context, kind=SpanKind.CLIENT, attributes=attributes, start_time=start
        )
        self.chat = _Open(span, start, run.context)
        self.chat_usage = [0, 0, 0, 0]
        return self.chat

    def end_chat(self, at: int, status: Status | None, error_type: str | None) -> None:
        """Close the open ``chat`` span, if any."""
        chat, self.chat = self.chat, None
        if chat is not None:
            _fail(chat.span, status, error_type)
            chat.span.end(end_time=max(at, chat.start))

    # -- tool and subagent calls --------------------------------------------------------------

    def open_call(
        self,
        call_id: str,
        name: str,
        at: int,
        *,
        arguments: object = None,
        child_id: str | None = None,
        child_name: str | None = None,
        continued: bool = False,
    ) -> _Open:
        """Open the ``execute_tool`` span of a call; a subagent's child runs under it."""
        run = self.ensure_run(at)
        attributes: dict[str, Any] = {
            sc.OPERATION: "execute_tool",
            sc.TOOL_NAME: name,
            sc.TOOL_CALL_ID: call_id,
            sc.TOOL_TYPE: "function",
        }
        if child_id:
            attributes[sc.ACTORS_SUBAGENT_ID] = child_id
            if child_name:
                attributes[sc.ACTORS_SUBAGENT_NAME] = child_name
        if self.transcript is not None and arguments is not None:
            attributes[sc.TOOL_ARGUMENTS] = as_json(arguments)
        span = self.tracer.start_span(
            f"execute_tool {name}",
            context=run.context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=at,
        )
        call = _Open(span, at, trace.set_span_in_context(span, ROOT), name, child_id)
        self.calls[call_id] = call
        if child_id:
            self.child_calls[child_id] = call_id
            if not self.replaying:
                self.tree.hand_to_child(child_id, call.context, run=not continued)
        return call

    def end_call(
        self, call_id: str, at: int, status: Status | None, error_type: str | None
    ) -> _Open | None:
        """Close a call's span, if it is open."""
        call = self.calls.pop(call_id, None)
        if call is not None:
            _fail(call.span, status, error_type)
            call.span.end(end_time=max(at, call.start))
        return call

    def delegator(self) -> _Open:
        """Where a child started by a tool (``ctx.delegate``) goes: under that tool's call.

        The log does not say which call delegated; with one tool running it is that one's,
        with several the run's.
        """
        tools = [call for call in self.calls.values() if call.child_id is None]
        if len(tools) == 1:
            return tools[0]
        return self.ensure_run(self.last)


def _fail(span: Span, status: Status | None, error_type: str | None) -> None:
    if error_type is not None:
        span.set_attribute(sc.ERROR_TYPE, error_type)
    if status is not None:
        span.set_status(status)
