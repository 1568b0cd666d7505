"""Errors as the API answers them: an HTTP status and a JSON body with a typed ``code``."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from actors.exceptions import (
    ActorsError,
    AgentDefinitionError,
    SessionBusyError,
    SessionNotFoundError,
    UnknownRequestError,
    UserError,
)
from actors.serve._api_error import ApiError
from actors.serve._json import json_response

__all__ = ["ApiError", "api_error_of", "error_response", "handle_api_error"]


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """The JSON response of an error."""
    return json_response({"error": {"code": code, "message": message}}, status, headers)


async def handle_api_error(_request: Request, exc: Exception) -> Response:
    """Starlette's handler for `ApiError`."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message)


def api_error_of(exc: ActorsError) -> ApiError:
    """The API error a library error stands for (a caller's mistake, or a busy session)."""
    if isinstance(exc, SessionNotFoundError):
        return ApiError(404, "session_not_found", str(exc))
    if isinstance(exc, SessionBusyError):
        return ApiError(
            409, "session_busy", f"{exc}; another process serves this session, try it there"
        )
    if isinstance(exc, UnknownRequestError):
        return ApiError(409, "unknown_request", str(exc))
    if isinstance(exc, AgentDefinitionError):
        return ApiError(409, "wrong_agent", str(exc))
    if isinstance(exc, UserError):
        return ApiError(400, "invalid_request", str(exc))
    return ApiError(500, "internal", f"{type(exc).__name__}: {exc}")
