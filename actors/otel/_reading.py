"""Reading an agent's log into its spans: what each event opens, annotates and closes.

`read` folds one event into an `AgentSpans` as it is appended (or as a stored log is replayed);
`restore` reads a restored agent's log without making spans, then continues a run that is
still open.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from actors import Event
from actors.otel import _semconv as sc
from actors.otel._content import as_json, content_text
from actors.otel._spans import AgentSpans, ns

__all__ = ["read", "restore"]

_NO_OP = trace.NoOpTracer()


def read(spans: AgentSpans, event: Event) -> None:
    """Fold one event of an agent's log into its spans."""
    at = ns(event.created_at)
    spans.last = max(spans.last, at)
    message = spans.transcript.read(event) if spans.transcript is not None else None
    kind = event.type
    handler = _HANDLERS.get(kind)
    if handler is not None:
        handler(spans, event.data, at, message)
    elif "." in kind and spans.run is not None:  # a user event (app.note): its name only
        spans.run.span.add_event(kind, timestamp=at)
    if kind not in ("turn_start", "activated"):
        spans.woke_at = None


def restore(spans: AgentSpans, events: Iterable[Event], now: int) -> None:
    """An agent came back from its store: read its log, then continue a run still open.

    Nothing of the log is exported again; a run still open (suspended) continues in a new
    ``invoke_agent`` span, with its open calls, from the wake (or ``now``).
    """
    last: Event | None = None
    spans.tracer, spans.replaying = _NO_OP, True
    try:
        for event in events:
            read(spans, event)
            last = event
    finally:
        spans.tracer, spans.replaying = spans.tree.tracer, False
    spans.pause(spans.last, "")
    woke = last is not None and last.type == "activated"
    if woke:
        now = spans.woke_at = spans.last
    if spans.paused is not None:
        spans.continue_run(max(now, spans.last))
        if woke and spans.run is not None:
            spans.run.span.add_event("actors.activated", timestamp=spans.run.start)


_Handler = Callable[[AgentSpans, dict[str, Any], int, "dict[str, Any] | None"], None]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _turn_start(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    if spans.run is not None:  # a turn that never ended: the log was cut short
        spans.end_run(at, "interrupted", "interrupted", "the turn never ended")
    spans.paused = None
    woke = spans.woke_at
    spans.start_run(woke if woke is not None and woke <= at else at, _text(data.get("run_id")))
    if woke is not None and spans.run is not None:
        spans.run.span.add_event("actors.activated", timestamp=woke)


def _turn_end(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    reason = _text(data.get("reason")) or "completed"
    if reason == "completed":
        spans.end_run(at, reason, None, None)
    elif reason == "cancelled":
        spans.end_run(at, reason, "cancelled", f"cancelled: {spans.cancel_reason}")
    elif reason == "interrupted":
        spans.end_run(at, reason, "interrupted", "the process stopped during the run")
    else:  # error, limit
        error_type, detail = spans.error or (reason, reason)
        spans.end_run(at, reason, error_type, detail)


def _user_message(
    spans: AgentSpans, data: dict[str, Any], at: int, message: dict[str, Any] | None
) -> None:
    run = spans.run
    if run is not None and not spans.prompt_seen:
        spans.prompt_seen = True
        if message is not None:
            run.span.set_attribute(sc.INPUT_MESSAGES, as_json([message]))


def _assistant_message(
    spans: AgentSpans, data: dict[str, Any], at: int, message: dict[str, Any] | None
) -> None:
    spans.output = message


def _step_start(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.ensure_run(at)
    spans.end_chat(at, None, None)
    spans.step_start = at


def _request_header(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.end_chat(at, None, None)
    spans.open_chat(at, _text(data.get("model")) or None, data.get("settings"))


def _usage(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    counts = [n if isinstance(n := data.get(name), int) else 0 for name in names]
    spans.usage = [have + more for have, more in zip(spans.usage, counts, strict=True)]
    if spans.chat is not None:  # set when the request ends
        spans.chat_usage = [
            have + more for have, more in zip(spans.chat_usage, counts, strict=True)
        ]


def _step_end(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    chat = spans.chat
    if chat is None:
        if spans.step_start is None:
            return
        chat = spans.open_chat(at, _text(data.get("model")) or None, None)
    attributes: dict[str, Any] = {}
    if any(spans.chat_usage):
        attributes.update(sc.usage_attributes(spans.chat_usage))
    if reason := _text(data.get("finish_reason")):
        attributes[sc.RESPONSE_FINISH_REASONS] = [reason]
    if model := _text(data.get("model")):
        attributes[sc.RESPONSE_MODEL] = model
    if spans.transcript is not None and spans.output is not None and not data.get("error"):
        output = {**spans.output, "finish_reason": reason or "stop"}
        attributes[sc.OUTPUT_MESSAGES] = as_json([output])
    chat.span.set_attributes(attributes)
    error = _text(data.get("error"))
    status = Status(StatusCode.ERROR, f"the model failed: {error}") if error else None
    spans.end_chat(at, status, error or None)


def _tool_call(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    call_id = _text(data.get("tool_call_id"))
    call = spans.calls.get(call_id)
    if call is None:
        spans.open_call(call_id, _text(data.get("name")), at, arguments=data.get("arguments"))
    elif spans.transcript is not None and "arguments" in data:  # a subagent's, or re-run
        call.span.set_attribute(sc.TOOL_ARGUMENTS, as_json(data["arguments"]))


def _subagent_spawned(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    child_id = _text(data.get("child_id"))
    call_id = _text(data.get("tool_call_id"))
    child_name = _text(data.get("agent")) or None
    if call_id:
        if call_id not in spans.calls:
            spans.open_call(
                call_id, _text(data.get("name")), at, child_id=child_id, child_name=child_name
            )
        return
    # Delegated by a tool: the child runs under that tool's call.
    host = spans.delegator()
    attributes = {sc.ACTORS_SUBAGENT_ID: child_id, sc.ACTORS_SUBAGENT_NAME: child_name or ""}
    host.span.add_event("actors.delegated", attributes, timestamp=at)
    if not spans.replaying:
        spans.tree.hand_to_child(child_id, host.context)


def _subagent_finished(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    call_id = spans.child_calls.pop(_text(data.get("child_id")), None)
    call = spans.calls.get(call_id) if call_id is not None else None
    if call is None:
        return
    status = _text(data.get("status")) or "completed"
    call.span.set_attribute(sc.ACTORS_SUBAGENT_STATUS, status)
    if status != "completed" or data.get("error"):
        error = _text(data.get("error"))
        error_type = error.partition(":")[0] if error else status
        call.failure = (error_type or status, error or status)


def _tool_result(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    call_id = _text(data.get("tool_call_id"))
    call = spans.calls.get(call_id)
    if call is None:  # refused before it ran (unknown tool, bad arguments): a moment
        call = spans.open_call(call_id, _text(data.get("tool_name")), at)
    content = content_text(data.get("content"))  # a part as a placeholder, never base64
    capture = spans.transcript is not None
    if call.failure is not None:
        error_type, detail = call.failure
        status = Status(StatusCode.ERROR, detail if capture else None)
        spans.end_call(call_id, at, status, error_type)
    elif data.get("is_error"):
        status = Status(StatusCode.ERROR, content if capture else None)
        spans.end_call(call_id, at, status, sc.tool_error_type(content))
    else:
        if capture:
            call.span.set_attribute(sc.TOOL_RESULT, content)
        spans.end_call(call_id, at, None, None)


def _request_attributes(spans: AgentSpans, request: dict[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "actors.request.id": _text(request.get("id")),
        "actors.request.kind": _text(request.get("kind")),
    }
    if spans.transcript is not None and request.get("prompt"):
        attributes["actors.request.prompt"] = _text(request.get("prompt"))
    return attributes


def _suspended(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    request, tool_call = _object(data.get("request")), _object(data.get("tool_call"))
    run = spans.ensure_run(at)
    attributes = _request_attributes(spans, request)
    attributes["actors.request.approval"] = bool(data.get("approval"))
    run.span.add_event("actors.suspended", attributes, timestamp=at)
    call_id = _text(tool_call.get("id"))
    if not call_id:
        return
    call = spans.calls.get(call_id)
    if call is None:  # waiting for approval: it has not run yet
        call = spans.open_call(
            call_id, _text(tool_call.get("name")), at, arguments=tool_call.get("arguments")
        )
    call.span.add_event("actors.suspended", attributes, timestamp=at)
    spans.requests[_text(request.get("id"))] = call_id


def _resumed(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    request_id = _text(data.get("request_id"))
    attributes: dict[str, Any] = {"actors.request.id": request_id}
    attributes["actors.ok"] = bool(data.get("ok"))
    if closed := _text(data.get("closed")):
        attributes["actors.closed"] = closed
    if by := _text(data.get("by")):
        attributes["actors.by"] = by
    spans.ensure_run(at).span.add_event("actors.resumed", attributes, timestamp=at)
    call = spans.calls.get(spans.requests.pop(request_id, ""))
    if call is not None:
        call.span.add_event("actors.resumed", attributes, timestamp=at)


def _steered(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    attributes = {"actors.content": content_text(data.get("content"))} if spans.transcript else {}
    spans.ensure_run(at).span.add_event("actors.steered", attributes, timestamp=at)


def _cancelled(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.cancel_reason = _text(data.get("reason"))
    attributes = {"actors.reason": spans.cancel_reason}
    spans.ensure_run(at).span.add_event("actors.cancelled", attributes, timestamp=at)


def _error(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.error = (_text(data.get("type")) or "_OTHER", _text(data.get("message")))
    attributes = {"exception.type": spans.error[0], "exception.message": spans.error[1]}
    spans.ensure_run(at).span.add_event("exception", attributes, timestamp=at)


def _recovered(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    if spans.run is not None:
        spans.run.span.add_event("actors.recovered", timestamp=at)


def _passivated(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.pause(at, "passivated")


def _activated(spans: AgentSpans, data: dict[str, Any], at: int, _: object) -> None:
    spans.woke_at = at
    if spans.paused is not None:
        spans.continue_run(at)
        if spans.run is not None:
            spans.run.span.add_event("actors.activated", timestamp=at)


_HANDLERS: dict[str, _Handler] = {
    "turn_start": _turn_start,
    "turn_end": _turn_end,
    "user_message": _user_message,
    "assistant_message": _assistant_message,
    "step_start": _step_start,
    "request_header": _request_header,
    "usage": _usage,
    "step_end": _step_end,
    "tool_call": _tool_call,
    "subagent_spawned": _subagent_spawned,
    "subagent_finished": _subagent_finished,
    "tool_result": _tool_result,
    "suspended": _suspended,
    "resumed": _resumed,
    "steered": _steered,
    "cancelled": _cancelled,
    "error": _error,
    "recovered": _recovered,
    "passivated": _passivated,
    "activated": _activated,
}
"""What each framework event does to the spans; the others (messages of the transcript,
context updates) only feed the captured content."""
