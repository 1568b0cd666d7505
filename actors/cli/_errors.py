"""The one error the command reports itself: a message and a hint, never a traceback."""

from __future__ import annotations

__all__ = ["CliError"]


class CliError(Exception):
    """A failure to report as one line plus a hint, with an exit code.

    Args:
        message: What went wrong, in one line.
        hint: What to do about it, in one line.
        code: The exit code: 2 for a usage mistake, 1 for anything else.
    """

    def __init__(self, message: str, hint: str = "", *, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code
