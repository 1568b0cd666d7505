"""Where a Postgres store connects, told without its password, and what a failure means.

`Target` reads a connection string (a ``postgresql://`` URL or ``key=value`` pairs, as libpq
takes them) once; everything the store shows afterwards (its repr, its errors, its logs) is
built from the host, port, database and user, and any text from the driver or the server is
scrubbed of the password first.
"""

from __future__ import annotations

import getpass
import os
import re
import urllib.parse
from dataclasses import dataclass, field

import psycopg
import psycopg.conninfo
import psycopg.pq

from actors.exceptions import (
    DatabaseNotFoundError,
    StoreAuthenticationError,
    StoreConnectionError,
    StoreError,
    UserError,
)

__all__ = ["Target", "connect_error", "mask", "query_error"]

# Where libpq's own messages put a password, should a driver error quote the string.
_URL_PASSWORD = re.compile(r"(\w+://[^:/@\s]*:)[^@\s]*@")
_KEY_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_AUTH_PHRASES = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "pg_hba.conf",
    "password is required",
)
_MISSING_DB = re.compile(r'database "[^"]*" does not exist')
_LOST_STATES = {"57P01", "57P02", "57P03", "53300"}


def mask(text: str) -> str:
    """``text`` with anything shaped like a password in a connection string replaced."""
    return _KEY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed connection string: where the store connects and as whom.

    Attributes:
        dsn: The connection string as given (it may hold the password: never show it).
        host: The server's host name or address, or the socket directory.
        port: The server's port.
        dbname: The database.
        user: The user name.
    """

    dsn: str = field(repr=False)
    host: str
    port: str
    dbname: str
    user: str
    secrets: tuple[str, ...] = field(repr=False, default=())

    @classmethod
    def parse(cls, dsn: str) -> Target:
        """Read a connection string; values it leaves out come from libpq's defaults.

        Raises:
            UserError: ``dsn`` is not a string libpq can read.
        """
        if not isinstance(dsn, str) or not dsn.strip():
            raise UserError(
                "PostgresStore needs a connection string such as "
                "'postgresql://user@localhost:5432/dbname', got "
                f"{mask(dsn) if isinstance(dsn, str) else type(dsn).__name__!r}"
            )
        try:
            given = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            reason = mask(str(exc).replace(dsn, mask(dsn))).strip()
            failure = UserError(
                f"the connection string is not one PostgreSQL reads ({reason}); write it as "
                "'postgresql://user@host:port/dbname', and keep the password in PGPASSWORD or "
                "~/.pgpass"
            )
        else:
            return cls._from(dsn, {key: str(value) for key, value in given.items()})
        raise failure  # outside the except block: the driver's error quotes the string

    @classmethod
    def _from(cls, dsn: str, given: dict[str, str]) -> Target:
        defaults = {
            option.keyword.decode(): option.val.decode()
            for option in psycopg.pq.Conninfo.get_defaults()
            if option.val is not None
        }

        def value(key: str, fallback: str) -> str:
            return given.get(key) or defaults.get(key) or fallback

        user = value("user", _os_user())
        password = given.get("password") or os.environ.get("PGPASSWORD", "")
        secrets = tuple(
            {password, urllib.parse.quote(password, safe=""), urllib.parse.quote_plus(password)}
            - {""}
        )
        return cls(
            dsn=dsn,
            host=value("host", "") or value("hostaddr", "local socket"),
            port=value("port", "5432"),
            dbname=value("dbname", user),
            user=user,
            secrets=secrets,
        )

    @property
    def url(self) -> str:
        """The connection string without the password: ``postgresql://user@host:port/db``."""
        host = self.host if "/" not in self.host and self.host != "local socket" else ""
        query = f"?host={self.host}" if "/" in self.host else ""
        return f"postgresql://{self.user}@{host}:{self.port}/{self.dbname}{query}"

    @property
    def server(self) -> str:
        """The server, as errors name it: ``host:port``."""
        return f"{self.host}:{self.port}"

    def scrub(self, text: str) -> str:
        """``text`` with the password (in every form it was given) replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return mask(text)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (some containers)
        return "postgres"


def _detail(target: Target, exc: BaseException) -> str:
    """The driver's message as one sentence, scrubbed, without libpq's 'connection failed'."""
    lines = [line.strip() for line in target.scrub(str(exc)).splitlines() if line.strip()]
    text = re.sub(r"^connection failed: ", "", " ".join(lines) or type(exc).__name__)
    return text if text.endswith((".", "?", "!")) else f"{text}."


def connect_error(target: Target, exc: psycopg.Error) -> StoreError:
    """The `StoreError` for a connection attempt that failed."""
    detail = _detail(target, exc)
    lower = detail.lower()
    if any(phrase in lower for phrase in _AUTH_PHRASES):
        return StoreAuthenticationError(
            f"the PostgreSQL server at {target.server} refused user {target.user!r} for "
            f"database {target.dbname!r}: {detail} Check the user name and password (keep the "
            "password in PGPASSWORD or ~/.pgpass rather than in the connection string)"
        )
    if _MISSING_DB.search(detail):
        return DatabaseNotFoundError(
            f"database {target.dbname!r} does not exist on the PostgreSQL server at "
            f"{target.server}; create it (createdb {target.dbname}) or name another database "
            "in the connection string"
        )
    return StoreConnectionError(
        f"cannot connect to the PostgreSQL server at {target.server} (database "
        f"{target.dbname!r}, user {target.user!r}): {detail} Check that the server runs and "
        "that the host and port are right"
    )


def query_error(target: Target, exc: psycopg.Error, what: str) -> StoreError:
    """The `StoreError` for a statement that failed while ``what``."""
    detail = _detail(target, exc)
    where = f"{target.url}"
    state = exc.sqlstate or ""
    if isinstance(exc, psycopg.OperationalError) and (
        not state or state.startswith("08") or state in _LOST_STATES
    ):
        return StoreConnectionError(
            f"lost the connection to the PostgreSQL server at {target.server} while {what}: "
            f"{detail} The call may or may not have been committed; retrying it is safe "
            "(events already stored are skipped)"
        )
    if state == "42501":
        hint = "Grant the user the privileges the store needs on its schema."
    elif state == "25006":
        hint = "Connect to the primary server: this one is read-only."
    elif state.startswith("23"):
        hint = "Another writer changed the same rows at once; reload the session and retry."
    else:
        hint = "See the server's log for details."
    code = f" (SQLSTATE {state})" if state else ""
    return StoreError(f"{what} failed on {where}{code}: {detail} {hint}")
