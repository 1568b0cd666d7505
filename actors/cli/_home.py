"""Where the command keeps its sessions: ``$ACTORS_HOME/sessions.sqlite``."""

from __future__ import annotations

import os
from pathlib import Path

from actors.cli._errors import CliError
from actors.store import SQLiteStore

__all__ = ["DB_NAME", "actors_home", "default_db", "open_store"]

DB_NAME = "sessions.sqlite"


def actors_home() -> Path:
    """``$ACTORS_HOME``, or ``~/.actors`` when it is unset or empty."""
    home = os.environ.get("ACTORS_HOME", "").strip()
    return Path(home).expanduser() if home else Path.home() / ".actors"


def default_db() -> Path:
    """The session database used when ``--db`` is not given."""
    return actors_home() / DB_NAME


def open_store(db: str | os.PathLike[str] | None, *, create: bool) -> SQLiteStore:
    """Open the session store at ``db`` (or the default).

    Args:
        db: The database file, or None for the default.
        create: Create the file (and its directory) when missing; otherwise a missing file is
            an error that says how to make one.

    Raises:
        CliError: The file is missing (and ``create`` is false) or cannot be made.
    """
    path = Path(db).expanduser() if db is not None else default_db()
    if not path.exists():
        if not create:
            raise CliError(
                f"no session database at {path}",
                "run 'actors demo' or 'actors run' first, or pass --db PATH",
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(
                f"cannot create {path.parent}: {exc.strerror}",
                "set ACTORS_HOME to a writable folder, or pass --db PATH",
            ) from None
    return SQLiteStore(path)
