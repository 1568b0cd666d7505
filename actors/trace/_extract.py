"""Reading a stored session's logs into a `Trace`: which events open and close which spans."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from actors import AgentContext, Event
from actors.store import StoredAgent, StoredSession
from actors.trace._media import content_label
from actors.trace._model import Lane, Marker, MarkerKind, Span, SpanKind, SpanStatus, Trace

__all__ = ["build_trace"]

# How a turn_end's reason reads as a span status (the loop writes these reasons).
_TURN_STATUS: dict[str, SpanStatus] = {
    "completed": "ok",
    "error": "error",
    "limit": "error",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
}
_CHILD_STATUS: dict[str, SpanStatus] = {
    "completed": "ok",
    "failed": "error",
    "cancelled": "cancelled",
}
_LABEL_LENGTH = 120


def build_trace(session: StoredSession, branches: Sequence[tuple[str, int]] = ()) -> Trace:
    """Read a stored session into a `Trace`: one lane per agent, parents before children.

    Each agent's log is read with `AgentContext.deserialize`, so the trace holds exactly the
    events the library reads back, and each lane's usage is the agent's `AgentContext.usage`.

    Args:
        session: A session as `SessionStore.load` returns it.
        branches: Forks of the session (their ids and the root's seq each was cut after):
            marked on the root's lane, and linked from the page.

    Returns:
        The session's timeline.

    Raises:
        SerializationError: An agent's stored context cannot be read.
    """
    lanes = tuple(_lane(agent, depth) for agent, depth in session.tree_order())
    origin = session.data.get("forked_from")
    forked_from = None
    if isinstance(origin, dict) and isinstance(origin.get("at"), int):
        forked_from = (str(origin.get("session")), int(origin["at"]))
    forks = [(f"forked from {forked_from[0]}", forked_from[1])] if forked_from else []
    forks += [(f"branch {branch}", at) for branch, at in branches]
    if forks and lanes and lanes[0].agent_id == session.root_agent_id:
        lanes = (_with_forks(lanes[0], forks), *lanes[1:])
    return Trace(
        session_id=session.session_id,
        root_agent_id=session.root_agent_id,
        created_at=session.created_at,
        updated_at=session.updated_at,
        lanes=lanes,
        forked_from=forked_from,
        branches=tuple(branches),
    )


def _with_forks(lane: Lane, forks: Sequence[tuple[str, int]]) -> Lane:
    """The root's lane with a ``fork`` marker at each event a fork was cut after."""
    when = {event.seq: event.created_at for event in lane.events}
    marks = [
        Marker("fork", lane.agent_id, when[at], label, at) for label, at in forks if at in when
    ]
    markers = tuple(sorted((*lane.markers, *marks), key=lambda m: (m.seq, m.kind == "fork")))
    return dataclasses.replace(lane, markers=markers)


def _lane(stored: StoredAgent, depth: int) -> Lane:
    context = AgentContext.deserialize(stored.context)
    record = stored.record
    waiting = record.status == "suspended" or bool(context.suspended)
    reader = _LogReader(record.agent_id, waiting)
    for event in context.events:
        reader.read(event)
    spans, markers = reader.finish()
    return Lane(
        agent_id=record.agent_id,
        name=record.name,
        parent_id=record.parent_id,
        status=record.status,
        depth=depth,
        events=context.events,
        spans=spans,
        markers=markers,
        usage=context.usage,
    )


@dataclass
class _Open:
    """A span being read: mutable until its end event, then frozen into a `Span`."""

    kind: SpanKind
    start: datetime
    label: str
    seqs: list[int]
    end: datetime
    child_id: str | None = None
    child_status: SpanStatus | None = None
    status: SpanStatus = "ok"

    def add(self, event: Event) -> None:
        self.seqs.append(event.seq)
        self.end = max(self.end, event.created_at)

    def freeze(self, agent_id: str) -> Span:
        return Span(
            kind=self.kind,
            agent_id=agent_id,
            start=self.start,
            end=max(self.end, self.start),
            label=self.label,
            status=self.status,
            seqs=tuple(self.seqs),
            child_id=self.child_id,
        )


def _open(kind: SpanKind, event: Event, label: str, child_id: str | None = None) -> _Open:
    return _Open(kind, event.created_at, label, [event.seq], event.created_at, child_id)


@dataclass
class _LogReader:
    """Reads one agent's events in order into its spans and markers."""

    agent_id: str
    waiting: bool
    turn: _Open | None = None
    step: _Open | None = None
    calls: dict[str, _Open] = field(default_factory=dict)  # open tool/subagent calls by key
    patched: list[_Open] = field(default_factory=list)  # results written by recovery/cancel
    request_call: dict[str, str] = field(default_factory=dict)
    child_call: dict[str, str] = field(default_factory=dict)
    done: list[_Open] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    last: datetime | None = None

    def read(self, event: Event) -> None:
        self.last = event.created_at if self.last is None else max(self.last, event.created_at)
        kind, data = event.type, event.data
        if kind == "turn_start":
            if self.turn is not None:  # a turn that never ended: a log cut short
                self._close_turn("open")
            self.turn = _open("turn", event, _text(data.get("run_id")) or "turn")
            return
        if self.turn is not None:
            self.turn.add(event)
        if self.step is not None and kind != "step_start":
            self.step.add(event)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event, data)
        elif "." in kind:  # a user event type, namespaced like app.note
            self._mark("custom", event, kind)

    # -- turns and model requests -------------------------------------------------------------

    def _on_turn_end(self, event: Event, data: dict[str, Any]) -> None:
        reason = _text(data.get("reason"))
        status = _TURN_STATUS.get(reason, "ok")
        if self.turn is not None and reason not in ("completed", ""):
            self.turn.label = f"{self.turn.label} ({reason})"
        self._close_turn(status)

    def _close_turn(self, status: SpanStatus) -> None:
        # What the turn's end cut short ends with it; results written for calls that were
        # cut short (by recovery, a cancellation or a failure) take the turn's status.
        inner: SpanStatus = status if status != "ok" else "open"
        if self.step is not None:
            self._finish(self.step, inner)
            self.step = None
        for call in self.calls.values():
            self._finish(call, inner)
        self.calls.clear()
        for call in self.patched:
            call.status = inner if inner != "open" else "error"
        self.patched.clear()
        if self.turn is not None:
            self._finish(self.turn, status)
            self.turn = None

    def _on_step_start(self, event: Event, data: dict[str, Any]) -> None:
        if self.step is not None:
            self._finish(self.step, "open")
        self.step = _open("model", event, f"step {_text(data.get('step')) or '?'}")

    def _on_request_header(self, event: Event, data: dict[str, Any]) -> None:
        if self.step is not None and (model := _text(data.get("model"))):
            self.step.label = model

    def _on_step_end(self, event: Event, data: dict[str, Any]) -> None:
        if self.step is None:
            return
        if (model := _text(data.get("model"))) and self.step.label.startswith("step "):
            self.step.label = model
        error = _text(data.get("error"))
        if error:
            self.step.label = f"{self.step.label}: {error}"
        self._finish(self.step, "error" if error else "ok")
        self.step = None

    # -- tool and subagent calls --------------------------------------------------------------

    def _call(self, key: str, kind: SpanKind, event: Event, label: str) -> _Open:
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = _open(kind, event, label)
        else:
            call.add(event)
        return call

    def _on_subagent_spawned(self, event: Event, data: dict[str, Any]) -> None:
        child_id = _text(data.get("child_id"))
        key = _text(data.get("tool_call_id")) or f"delegated:{child_id}"
        name = _text(data.get("name")) or _text(data.get("agent"))
        call = self._call(key, "subagent", event, f"{name} → {child_id}")
        call.kind, call.child_id = "subagent", child_id
        self.child_call[child_id] = key

    def _on_tool_call(self, event: Event, data: dict[str, Any]) -> None:
        self._call(_text(data.get("tool_call_id")), "tool", event, _text(data.get("name")))

    def _on_suspended(self, event: Event, data: dict[str, Any]) -> None:
        request, tool_call = _object(data.get("request")), _object(data.get("tool_call"))
        call_id, request_id = _text(tool_call.get("id")), _text(request.get("id"))
        if call_id:
            self.request_call[request_id] = call_id
            self._call(call_id, "tool", event, _text(tool_call.get("name")))
        kind = _text(request.get("kind")) or "request"
        self._mark("suspended", event, f"{kind} {request_id}: {_text(request.get('prompt'))}")

    def _on_resumed(self, event: Event, data: dict[str, Any]) -> None:
        request_id = _text(data.get("request_id"))
        call = self.calls.get(self.request_call.get(request_id, ""))
        if call is not None:
            call.add(event)
        if closed := _text(data.get("closed")):
            how = f"closed: {closed}"
        else:
            how = "approved" if data.get("ok") else "declined"
        self._mark("resumed", event, f"{request_id} {how}")

    def _on_context_update(self, event: Event, data: dict[str, Any]) -> None:
        call = self.calls.get(_text(data.get("source")))
        if call is not None:
            call.add(event)

    def _on_subagent_finished(self, event: Event, data: dict[str, Any]) -> None:
        child_id = _text(data.get("child_id"))
        key = self.child_call.get(child_id, "")
        call = self.calls.get(key)
        if call is None:
            return
        call.add(event)
        status = _CHILD_STATUS.get(_text(data.get("status")), "ok")
        if data.get("error"):
            status = "error"
        if key.startswith("delegated:"):  # a child started by a tool: no result of its own
            self._finish(self.calls.pop(key), status)
        else:
            call.child_status = status

    def _on_tool_result(self, event: Event, data: dict[str, Any]) -> None:
        call_id = _text(data.get("tool_call_id"))
        call = self.calls.pop(call_id, None)
        if call is None:  # refused before it ran (unknown tool, bad arguments): one event
            call = _open("tool", event, _text(data.get("tool_name")))
        else:
            call.add(event)
        status: SpanStatus = "error" if data.get("is_error") else "ok"
        if call.child_status is not None and call.child_status != "ok":
            status = call.child_status
        self._finish(call, status)
        if data.get("source") == "recovery":
            self.patched.append(call)

    # -- moments ------------------------------------------------------------------------------

    def _on_steered(self, event: Event, data: dict[str, Any]) -> None:
        self._mark("steered", event, content_label(data.get("content")))

    def _on_cancelled(self, event: Event, data: dict[str, Any]) -> None:
        self._mark("cancelled", event, _text(data.get("reason")) or "cancelled")

    def _on_error(self, event: Event, data: dict[str, Any]) -> None:
        self._mark("error", event, f"{_text(data.get('type'))}: {_text(data.get('message'))}")

    def _on_recovered(self, event: Event, data: dict[str, Any]) -> None:
        counts = [
            f"{len(data.get(key) or [])} {key.replace('_', ' ')}"
            for key in ("not_started", "outcome_unknown")
            if data.get(key)
        ]
        run_id = _text(data.get("run_id"))
        self._mark("recovered", event, ", ".join([run_id, *counts]) if counts else run_id)

    def _on_compacted(self, event: Event, data: dict[str, Any]) -> None:
        first, last = data.get("first"), data.get("last")
        count = (
            last - first + 1 - len(data.get("kept") or ())
            if isinstance(first, int) and isinstance(last, int)
            else 0
        )
        how = (
            "trimmed"
            if data.get("fallback") == "trim"
            else f"summarised by {_text(data.get('summarizer'))}"
        )
        self._mark("compacted", event, f"{count} messages {how}")

    def _mark(self, kind: MarkerKind, event: Event, label: str) -> None:
        self.markers.append(Marker(kind, self.agent_id, event.created_at, _short(label), event.seq))

    # -- the end ------------------------------------------------------------------------------

    def _finish(self, span: _Open, status: SpanStatus) -> None:
        if status in ("open", "suspended") and self.last is not None:
            span.end = max(span.end, self.last)
        span.status = status
        self.done.append(span)

    def finish(self) -> tuple[tuple[Span, ...], tuple[Marker, ...]]:
        """The spans, by start, and the markers; whatever is still open ends with the log."""
        if self.turn is not None or self.step is not None or self.calls:
            self._close_turn("suspended" if self.waiting else "open")
        order = {"turn": 0, "model": 1, "subagent": 2, "tool": 2}
        spans = sorted(self.done, key=lambda s: (s.start, order[s.kind], s.seqs[0]))
        return tuple(s.freeze(self.agent_id) for s in spans), tuple(self.markers)


_Handler = Callable[[_LogReader, Event, dict[str, Any]], None]
_HANDLERS: dict[str, _Handler] = {
    "turn_end": _LogReader._on_turn_end,
    "step_start": _LogReader._on_step_start,
    "request_header": _LogReader._on_request_header,
    "step_end": _LogReader._on_step_end,
    "subagent_spawned": _LogReader._on_subagent_spawned,
    "tool_call": _LogReader._on_tool_call,
    "suspended": _LogReader._on_suspended,
    "resumed": _LogReader._on_resumed,
    "context_update": _LogReader._on_context_update,
    "subagent_finished": _LogReader._on_subagent_finished,
    "tool_result": _LogReader._on_tool_result,
    "steered": _LogReader._on_steered,
    "cancelled": _LogReader._on_cancelled,
    "error": _LogReader._on_error,
    "recovered": _LogReader._on_recovered,
    "compacted": _LogReader._on_compacted,
}
"""What each framework event does to the spans (turn_start is read before any of these)."""


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LABEL_LENGTH else text[: _LABEL_LENGTH - 1] + "…"
