"""The one error the command reports itself: a message and a hint, never a traceback."""

from __future__ import annotations

from actors.exceptions import (
    ActorsError,
    AgentDefinitionError,
    DatabaseNotFoundError,
    ModelAuthenticationError,
    ModelError,
    RunError,
    SessionBusyError,
    SessionNotFoundError,
    StoreAuthenticationError,
    StoreConnectionError,
    StoreError,
    UnknownRequestError,
    UserError,
)

__all__ = ["CliError", "hint_for", "one_line", "run_failed"]


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


def hint_for(error: BaseException) -> str:
    """What to do about an error of the library, by its kind (or its cause's)."""
    if isinstance(error, RunError) and isinstance(error.__cause__, ActorsError):
        return hint_for(error.__cause__)
    if isinstance(error, SessionNotFoundError):
        return "list the stored sessions with 'actors sessions list'"
    if isinstance(error, UnknownRequestError):
        return "see the open requests with 'actors sessions show ID'"
    if isinstance(error, AgentDefinitionError):
        return "fix the agent spec named above"
    if isinstance(error, ModelAuthenticationError):
        return "set the provider's API key (e.g. OPENAI_API_KEY or ANTHROPIC_API_KEY)"
    if isinstance(error, ModelError):
        return "check the model name, the provider's key and the network"
    if isinstance(error, SessionBusyError):
        return "another process is writing the session; wait until it is done"
    if isinstance(error, StoreAuthenticationError):
        return "check the user name and password of --store (PGPASSWORD or ~/.pgpass)"
    if isinstance(error, DatabaseNotFoundError):
        return "create the database (createdb NAME), or name another one in --store"
    if isinstance(error, StoreConnectionError):
        return "check that the PostgreSQL server runs, and the host and port of --store"
    if isinstance(error, StoreError):
        return "check the session database, or pass another with --db PATH or --store DSN"
    if isinstance(error, RunError):
        return "the session keeps the partial transcript: see 'actors sessions show ID'"
    if isinstance(error, UserError):
        return "check the arguments given"
    return "run again with --debug for details"


def one_line(text: str) -> str:
    """The first line of ``text``."""
    return text.strip().splitlines()[0] if text.strip() else ""


def run_failed(error: RunError, session_id: str, db_flag: str) -> CliError:
    """A failed run, reported with the model's hint or where to see the partial work."""
    cause = error.__cause__
    if isinstance(cause, ActorsError) and not isinstance(cause, RunError):
        hint = hint_for(cause)
    else:
        hint = f"see what was done with 'actors sessions show {session_id}{db_flag}'"
    return CliError(one_line(str(error)) or type(error).__name__, hint)
