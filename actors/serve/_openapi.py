"""The OpenAPI 3.1 document of the API, written by hand (a test checks it against the routes)."""

from __future__ import annotations

from typing import Any

from actors import Agent, __version__

__all__ = ["openapi_document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("Error"), description)


SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"},
}

ERRORS = {
    "400": _error("Malformed JSON (bad_json) or an invalid body, query or id"),
    "401": _error("Missing or wrong bearer token (unauthorized)"),
    "429": _error("Too many requests from this client (rate_limited); see Retry-After"),
}
SESSION_ERRORS = {**ERRORS, "404": _error("No such session of this agent (session_not_found)")}
BODY_ERRORS = {**SESSION_ERRORS, "413": _error("The body is too large (body_too_large)")}
RUN_RESPONSES = {
    "200": {
        "description": (
            "With Accept: application/json (the default), the run's outcome once it ends. "
            "With Accept: text/event-stream, the whole tree's events as they happen; each "
            "event's id is its index in the run, the first is run_started (with the run id) "
            "and the last run_ended."
        ),
        "headers": {"X-Run-Id": {"schema": {"type": "string"}}},
        "content": {
            "application/json": {"schema": _ref("RunOutcome")},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    **BODY_ERRORS,
    "409": _error(
        "A run is in progress on the session (run_in_progress), an answered or unknown "
        "request (unknown_request), or another process holds the session (session_busy)"
    ),
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    "Usage": {
        "type": "object",
        "properties": {
            k: {"type": "integer", "minimum": 0}
            for k in ("requests", "input_tokens", "output_tokens", "tool_calls")
        },
    },
    "Content": {
        "description": "Text, or an array of parts (text, image, audio, document).",
        "oneOf": [
            {"type": "string"},
            {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {
                        "type": {"enum": ["text", "image", "audio", "document"]},
                        "text": {"type": "string"},
                        "media_type": {"type": "string", "examples": ["image/png"]},
                        "data": {"type": "string", "contentEncoding": "base64"},
                        "url": {"type": "string", "format": "uri"},
                        "name": {"type": "string"},
                    },
                },
            },
        ],
    },
    "Request": {
        "type": "object",
        "description": "A question a tool put to the host (an approval, an input, ...).",
        "properties": {
            "id": {"type": "string"},
            "kind": {"type": "string"},
            "prompt": {"type": "string"},
            "data": {},
            "agent_id": {"type": "string"},
            "path": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Answer": {
        "oneOf": [
            {"type": "boolean", "description": "Shorthand for {'ok': true|false}"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "ok": {"type": "boolean", "default": True},
                    "data": {},
                    "reason": {"type": ["string", "null"]},
                    "arguments": {"type": ["object", "null"]},
                },
            },
        ]
    },
    "Session": {
        "type": "object",
        "required": ["session_id", "agent", "created_at", "updated_at"],
        "properties": {
            "session_id": {"type": "string"},
            "agent": {"type": "string"},
            "root_agent_id": {"type": "string"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "agent_count": {"type": "integer"},
            "status": {"type": "string"},
            "run_id": {"type": ["string", "null"]},
        },
    },
    "RunResult": {
        "type": "object",
        "properties": {
            "status": {"enum": ["completed", "suspended", "cancelled"]},
            "output": {},
            "run_id": {"type": "string"},
            "agent_id": {"type": "string"},
            "requests": {"type": "array", "items": _ref("Request")},
            "usage": _ref("Usage"),
            "tree_usage": _ref("Usage"),
        },
    },
    "RunOutcome": {
        "type": "object",
        "required": ["run_id", "result", "error"],
        "properties": {
            "run_id": {"type": "string"},
            "result": {"oneOf": [_ref("RunResult"), {"type": "null"}]},
            "error": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
                    },
                    {"type": "null"},
                ]
            },
        },
    },
    "TreeNode": {
        "type": "object",
        "properties": {
            "agent_id": {"type": "string"},
            "name": {"type": "string"},
            "parent_id": {"type": ["string", "null"]},
            "status": {"type": "string"},
            "step": {"type": "integer"},
            "tool": {"type": ["string", "null"]},
            "children": {"type": "array", "items": _ref("TreeNode")},
        },
    },
    "Accepted": {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "run_id": {"type": ["string", "null"]}},
    },
}


def _body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "required": required}
    return {"required": bool(required), "content": {"application/json": {"schema": schema}}}


def _paths() -> dict[str, Any]:
    session = [SESSION_ID]
    return {
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": _json({}, "Up")}}},
        "/agent": {
            "get": {
                "summary": "The served agent",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "description": {"type": "string"},
                            },
                        },
                        "The agent",
                    ),
                    **ERRORS,
                },
            }
        },
        "/sessions": {
            "post": {
                "summary": "Create a session",
                "requestBody": _body(
                    {"session_id": SESSION_ID["schema"], "metadata": {"type": "object"}}, []
                ),
                "responses": {
                    "201": _json(_ref("Session"), "Created"),
                    **ERRORS,
                    "409": _error("The id is taken (session_exists)"),
                    "413": BODY_ERRORS["413"],
                },
            },
            "get": {
                "summary": "List this agent's sessions, newest first",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    },
                    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "sessions": {"type": "array", "items": _ref("Session")},
                                "total": {"type": "integer"},
                                "offset": {"type": "integer"},
                            },
                        },
                        "A page of sessions",
                    ),
                    **ERRORS,
                },
            },
        },
        "/sessions/{session_id}": {
            "get": {
                "summary": "A session and its root's status",
                "parameters": session,
                "responses": {"200": _json(_ref("Session"), "The session"), **SESSION_ERRORS},
            },
            "delete": {
                "summary": "Stop a session's agents and delete it",
                "parameters": session,
                "responses": {"204": {"description": "Deleted"}, **SESSION_ERRORS},
            },
        },
        "/sessions/{session_id}/tree": {
            "get": {
                "summary": "The session's agents, live",
                "parameters": session,
                "responses": {"200": _json(_ref("TreeNode"), "The tree"), **SESSION_ERRORS},
            }
        },
        "/sessions/{session_id}/usage": {
            "get": {
                "summary": "Usage per agent and in all",
                "parameters": session,
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "agents": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "agent_id": {"type": "string"},
                                            "usage": _ref("Usage"),
                                        },
                                    },
                                },
                                "total": _ref("Usage"),
                            },
                        },
                        "Usage",
                    ),
                    **SESSION_ERRORS,
                },
            }
        },
        "/sessions/{session_id}/requests": {
            "get": {
                "summary": "Open requests (approvals, questions) of every agent",
                "parameters": session,
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"requests": {"type": "array", "items": _ref("Request")}},
                        },
                        "Open requests",
                    ),
                    **SESSION_ERRORS,
                },
            }
        },
        "/sessions/{session_id}/transcript": {
            "get": {
                "summary": "An agent's messages (the root's by default)",
                "parameters": [
                    SESSION_ID,
                    {"name": "agent_id", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "agent_id": {"type": "string"},
                                "messages": {"type": "array", "items": {"type": "object"}},
                            },
                        },
                        "The transcript",
                    ),
                    **SESSION_ERRORS,
                },
            }
        },
        "/sessions/{session_id}/runs": {
            "post": {
                "summary": "Run a prompt (JSON result, or server-sent events)",
                "parameters": session,
                "requestBody": _body(
                    {
                        "prompt": {"$ref": "#/components/schemas/Content"},
                        "cancel_on_disconnect": {"type": "boolean", "default": False},
                    },
                    ["prompt"],
                ),
                "responses": RUN_RESPONSES,
            }
        },
        "/sessions/{session_id}/runs/{run_id}/events": {
            "get": {
                "summary": "A run's events again, after Last-Event-ID",
                "parameters": [
                    SESSION_ID,
                    {
                        "name": "run_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                    {"name": "last_event_id", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": {
                    "200": {
                        "description": "The events after the given id, then live ones",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    **ERRORS,
                    "404": _error("No stream of that run here (run_not_found)"),
                },
            }
        },
        "/sessions/{session_id}/answers": {
            "post": {
                "summary": "Answer open requests; the run goes on (JSON or server-sent events)",
                "parameters": session,
                "requestBody": _body(
                    {
                        "answers": {"type": "object", "additionalProperties": _ref("Answer")},
                        "cancel_on_disconnect": {"type": "boolean", "default": False},
                    },
                    ["answers"],
                ),
                "responses": RUN_RESPONSES,
            }
        },
        "/sessions/{session_id}/steer": {
            "post": {
                "summary": "A user message for the run's next step (or the next run)",
                "parameters": session,
                "requestBody": _body(
                    {"message": {"$ref": "#/components/schemas/Content"}}, ["message"]
                ),
                "responses": {"202": _json(_ref("Accepted"), "Queued"), **BODY_ERRORS},
            }
        },
        "/sessions/{session_id}/cancel": {
            "post": {
                "summary": "Cancel the run in progress and its subagents",
                "parameters": session,
                "requestBody": _body({"reason": {"type": "string"}}, []),
                "responses": {"202": _json(_ref("Accepted"), "Cancelling"), **BODY_ERRORS},
            }
        },
    }


def openapi_document(agent: Agent[Any]) -> dict[str, Any]:
    """The OpenAPI document of the API serving ``agent``."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": f"actors: {agent.name}",
            "version": __version__,
            "description": agent.description or f"The agent {agent.name!r}, served by actors.",
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "paths": _paths(),
    }
