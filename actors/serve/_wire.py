"""What the API sends: plain JSON of stream events, results, trees, transcripts and sessions.

Built field by field from the public types, so nothing the server holds (``tool_context``,
live handles) can end up in a response by accident.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from actors import (
    AgentContext,
    Request,
    RunEnded,
    RunResult,
    StreamEvent,
    SubagentFinished,
    SubagentSpawned,
    Suspended,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    TreeNode,
    Usage,
)
from actors.exceptions import ActorsError
from actors.store import SessionInfo, StoredSession

__all__ = [
    "error_of",
    "event_of",
    "jsonable",
    "requests_of",
    "result_of",
    "session_of",
    "transcript_of",
    "tree_of",
    "usage_of",
]


def jsonable(value: Any) -> Any:
    """Any output (text, a pydantic model, lists of them) as plain JSON."""
    try:
        return pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError:
        return repr(value)


def usage_of(usage: Usage) -> dict[str, int]:
    """A `Usage` as JSON."""
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def request_of(request: Request) -> dict[str, Any]:
    """A `Request` as JSON."""
    return request.model_dump(mode="json")


def error_of(error: BaseException) -> dict[str, str]:
    """A run's error as JSON: its type and message."""
    return {"type": type(error).__name__, "message": str(error)}


def result_of(result: RunResult[Any]) -> dict[str, Any]:
    """A `RunResult` as the API gives it (the transcript is its own endpoint)."""
    return {
        "status": result.status,
        "output": jsonable(result.output),
        "run_id": result.run_id,
        "agent_id": result.agent_id,
        "requests": [request_of(r) for r in result.requests],
        "usage": usage_of(result.usage),
        "tree_usage": usage_of(result.tree_usage),
    }


def event_of(event: StreamEvent) -> dict[str, Any]:
    """A `StreamEvent` as JSON: ``kind``, ``agent_id``, ``path`` and the event's own fields."""
    out: dict[str, Any] = {"kind": event.kind, "agent_id": event.agent_id, "path": list(event.path)}
    if isinstance(event, TextDelta):
        out["text"] = event.text
    elif isinstance(event, ToolCallDelta):
        out.update(
            index=event.index,
            text=event.text,
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
        )
    elif isinstance(event, ToolCallStarted):
        out.update(
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            arguments=jsonable(dict(event.arguments)),
        )
    elif isinstance(event, ToolCallFinished):
        out.update(
            tool_call_id=event.tool_call_id,
            tool_name=event.tool_name,
            content=event.content,
            is_error=event.is_error,
        )
    elif isinstance(event, SubagentSpawned):
        out.update(child_id=event.child_id, name=event.name, task=event.task)
    elif isinstance(event, SubagentFinished):
        out.update(child_id=event.child_id, status=event.status)
    elif isinstance(event, Suspended):
        out["request"] = request_of(event.request)
    elif isinstance(event, RunEnded):
        out["result"] = result_of(event.result) if event.result is not None else None
        out["error"] = error_of(event.error) if event.error is not None else None
    return out


def tree_of(node: TreeNode) -> dict[str, Any]:
    """A `TreeNode` (and its children) as JSON."""
    return {
        "agent_id": node.agent_id,
        "name": node.name,
        "parent_id": node.parent_id,
        "status": node.status,
        "step": node.step,
        "tool": node.tool,
        "children": [tree_of(child) for child in node.children],
    }


def session_of(info: SessionInfo | StoredSession, status: str | None = None) -> dict[str, Any]:
    """A session's summary as JSON."""
    out: dict[str, Any] = {
        "session_id": info.session_id,
        "agent": info.data.get("agent", ""),
        "root_agent_id": info.root_agent_id,
        "created_at": info.created_at.isoformat(),
        "updated_at": info.updated_at.isoformat(),
    }
    if isinstance(info, SessionInfo):
        out["agent_count"] = info.agent_count
    if status is not None:
        out["status"] = status
    return out


def contexts_of(stored: StoredSession) -> list[tuple[str, AgentContext]]:
    """Each agent's context, read from the store, in spawn order."""
    return [(a.agent_id, AgentContext.deserialize(a.context)) for a in stored.agents]


def usage_report(stored: StoredSession) -> dict[str, Any]:
    """Usage per agent of the session, and the total (every run of each agent)."""
    total = Usage()
    agents = []
    for agent_id, context in contexts_of(stored):
        total = total + context.usage
        agents.append({"agent_id": agent_id, "usage": usage_of(context.usage)})
    return {"agents": agents, "total": usage_of(total)}


def requests_of(stored: StoredSession) -> list[dict[str, Any]]:
    """The open requests of every agent of the session (answer them with ``/answers``)."""
    out = []
    for _agent_id, context in contexts_of(stored):
        for data in context.suspended.values():
            out.append(request_of(Request.model_validate(data["request"])))
    return out


def transcript_of(stored: StoredSession, agent_id: str) -> list[dict[str, Any]]:
    """The messages of one agent of the session, as JSON."""
    context = AgentContext.deserialize(stored.agent(agent_id).context)
    return [message.model_dump(mode="json") for message in context.messages]


def error_text(exc: ActorsError) -> str:
    """One line for an error."""
    return f"{type(exc).__name__}: {exc}"
