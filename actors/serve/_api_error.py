"""`ApiError`: a request the API refuses, with its HTTP status and typed code."""

from __future__ import annotations

__all__ = ["ApiError"]


class ApiError(Exception):
    """A request the API refuses: answered as ``{"error": {"code", "message"}}``.

    Attributes:
        status: The HTTP status.
        code: A stable, machine-readable reason (``bad_json``, ``session_not_found``, ...).
        message: What was wrong and what to do, for a person.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
