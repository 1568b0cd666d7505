"""Questions of a suspended run as MCP elicitation forms, and the forms' answers as `Answer`s."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mcp_types

from actors.context._suspension import Answer, Request

__all__ = ["answer_of", "form_of"]


def form_of(request: Request) -> tuple[str, dict[str, Any]]:
    """The message and the (flat) form schema that ask ``request`` of a person.

    An approval is a yes/no with an optional reason; any other request is one text answer.
    """
    if request.kind == "approval":
        data = request.data if isinstance(request.data, dict) else {}
        arguments = json.dumps(data.get("arguments", {}), ensure_ascii=False)
        message = f"{request.prompt or 'Allow this tool call?'}\n{data.get('tool', '')} {arguments}"
        return message.strip(), {
            "type": "object",
            "properties": {
                "approve": {"type": "boolean", "title": "Approve", "description": "Allow it?"},
                "reason": {"type": "string", "title": "Reason", "description": "Why, if not."},
            },
            "required": ["approve"],
        }
    return request.prompt or f"The agent asks for {request.kind}.", {
        "type": "object",
        "properties": {"answer": {"type": "string", "title": "Answer"}},
        "required": ["answer"],
    }


def answer_of(request: Request, result: mcp_types.ElicitResult | None) -> Answer:
    """The `Answer` a client's elicitation result gives (declined when there is none)."""
    if result is None:
        return Answer(ok=False, reason="the MCP client gave no answer")
    if result.action != "accept":
        return Answer(ok=False, reason=f"the user chose {result.action!r}")
    content: dict[str, Any] = dict(result.content or {})
    if request.kind == "approval":
        approved = content.get("approve") is True
        reason = content.get("reason")
        return Answer(ok=approved, reason=str(reason) if reason else None)
    return Answer(ok=True, data=content.get("answer"))
