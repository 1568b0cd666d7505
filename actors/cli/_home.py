"""Where the command keeps its sessions: ``$ACTORS_HOME/sessions.sqlite``, or ``--store DSN``."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from urllib.parse import quote, urlencode

from actors.cli._errors import CliError
from actors.store import PostgresStore, SessionStore, SQLiteStore

__all__ = ["DB_NAME", "actors_home", "default_db", "open_store", "store_flag", "where"]

DB_NAME = "sessions.sqlite"


def actors_home() -> Path:
    """``$ACTORS_HOME``, or ``~/.actors`` when it is unset or empty."""
    home = os.environ.get("ACTORS_HOME", "").strip()
    return Path(home).expanduser() if home else Path.home() / ".actors"


def default_db() -> Path:
    """The session database used when ``--db`` is not given."""
    return actors_home() / DB_NAME


def open_store(
    db: str | os.PathLike[str] | None, *, create: bool, store: str | None = None
) -> SessionStore:
    """Open the session store: the Postgres one at ``store``, else the SQLite file ``db``.

    Args:
        db: The SQLite database file, or None for the default.
        create: Create the SQLite file (and its directory) when missing; otherwise a missing
            file is an error that says how to make one. A Postgres store creates its tables.
        store: A PostgreSQL connection string (``--store DSN``), or None for SQLite.

    Raises:
        CliError: Both a file and a connection string were given, or the file is missing (and
            ``create`` is false) or cannot be made.
    """
    if store is not None:
        if db is not None:
            raise CliError("--db and --store name two session stores", "give one of them", code=2)
        return PostgresStore(store)
    path = Path(db).expanduser() if db is not None else default_db()
    if not path.exists():
        if not create:
            raise CliError(
                f"no session database at {path}",
                "run 'actors demo' or 'actors run' first, or pass --db PATH or --store DSN",
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(
                f"cannot create {path.parent}: {exc.strerror}",
                "set ACTORS_HOME to a writable folder, or pass --db PATH",
            ) from None
    return SQLiteStore(path)


def where(store: SessionStore) -> str:
    """Where a store keeps its sessions, as the command prints it (never a password)."""
    if isinstance(store, PostgresStore):
        return f"{store.url} (schema {store.schema})"
    if isinstance(store, SQLiteStore):
        return str(store.path)
    return repr(store)


def store_flag(db: str | None, store: str | None) -> str:
    """The option that names the same store again in a hint: `` --db PATH`` or `` --store DSN``.

    A connection string is repeated without its password (the hint is printed).
    """
    if store:
        return f" --store {shlex.quote(_without_password(store))}"
    return f" --db {shlex.quote(db)}" if db else ""


def _without_password(dsn: str) -> str:
    """``dsn`` as a ``postgresql://`` URL without its password (quoting-free in a shell)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        from actors.store._pg_target import misread
    except ImportError:
        return "DSN"
    try:
        params = {key: str(value) for key, value in conninfo_to_dict(dsn).items()}
    except Exception:  # unreadable: opening the store reports it; the hint only names the option
        return "DSN"
    if misread(dsn, params):  # a raw '@' or '/' in the password: its tail would show as the host
        return "DSN"
    params.pop("password", None)
    user, host = params.pop("user", ""), params.pop("host", "")
    port, dbname = params.pop("port", ""), params.pop("dbname", "")
    if "/" in host or "," in host:  # a socket directory, or several hosts
        params["host"], host = host, ""
    netloc = f"{quote(user, safe='')}@" if user else ""
    netloc += f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port else ""
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql://{netloc}/{quote(dbname, safe='')}{query}"
