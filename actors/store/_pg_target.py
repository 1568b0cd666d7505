"""Where a Postgres store connects, told without its password, and what a failure means.

`Target` reads a connection string (a ``postgresql://`` URL or ``key=value`` pairs, as libpq
takes them) once; everything the store shows afterwards (its repr, its errors, its logs) is
built from the host, port, database and user, and any text from the driver or the server is
scrubbed of the password first.

A malformed string is the hard case: libpq quotes pieces of it in its errors, and a URL whose
password holds a raw ``@`` or ``/`` parses "successfully" with the password's tail as the host
or the database. Such a URL is refused before anything connects, and the pieces libpq quotes
from a string it cannot read are shown only when they share nothing with what may be a secret
(found in the raw text, without trusting the parse).
"""

from __future__ import annotations

import difflib
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

__all__ = [
    "Target",
    "connect_error",
    "mask",
    "misread",
    "query_error",
    "raw_secrets",
    "redact",
]

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

# The libpq options whose values are secrets.
_SECRET_KEYS = (
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
)
_URL = re.compile(r"\s*postgres(?:ql)?://", re.IGNORECASE)
_KEYS = "|".join(_SECRET_KEYS)
# A secret option's value in a URL's query: up to the next ``&option=`` (a raw ``&`` may be the
# password's own), else to the end.
_QUERY_SECRET = re.compile(rf"[?&](?:{_KEYS})=(.*?)(?=&[A-Za-z_]+=|$)", re.IGNORECASE | re.DOTALL)
# A secret option's value in key=value form: a quoted value (to its closing quote, or to the
# end when it has none), or a bare one up to the next ``key=`` (it may hold raw spaces).
_PAIR_SECRET = re.compile(
    rf"(?:^|\s)(?:{_KEYS})\s*=\s*('(?:[^'\\]|\\.)*'?|.*?(?=\s+[A-Za-z_]+\s*=|\s*$))",
    re.IGNORECASE | re.DOTALL,
)
_FRAGMENT = re.compile(r'"[^"]*"|\'[^\']*\'|[^\s"\']+')
_URL_HINT = (
    "in a URL, write the '@', '/', '%', '?', '#' and spaces of a user name or password "
    "percent-encoded (%40, %2F, %25, %3F, %23, %20)"
)
_PAIRS_HINT = (
    "in key=value pairs, put a value with spaces in single quotes (password='a b'), with \\' "
    "and \\\\ for a quote and a backslash inside"
)
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
        except (psycopg.Error, UnicodeDecodeError) as exc:
            # A percent-encoding that is not UTF-8 ('%ff') fails in the driver's decoding; its
            # error holds the bytes of the string, so only its kind is told.
            bad = isinstance(exc, UnicodeDecodeError)
            text = "a percent-encoded value is not UTF-8" if bad else str(exc)
            reason = redact(text.replace(dsn, mask(dsn)), raw_secrets(dsn)).strip()
            hint = _URL_HINT if _URL.match(dsn) else _PAIRS_HINT
            failure = UserError(
                f"the connection string is not one PostgreSQL reads ({reason}); {hint}; or "
                "write it as 'postgresql://user@host:port/dbname' and keep the password in "
                "PGPASSWORD or ~/.pgpass"
            )
        else:
            values = {key: str(value) for key, value in given.items()}
            if not misread(dsn, values):
                return cls._from(dsn, values)
            failure = UserError(
                "the connection string would not be read as meant (libpq ends a URL's user "
                f"name and password at the first '@' or '/'): {_URL_HINT}, or keep the password "
                "in PGPASSWORD or ~/.pgpass"
            )
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
        given_secrets = [given.get(key, "") for key in _SECRET_KEYS]
        passwords = {*given_secrets, os.environ.get("PGPASSWORD", ""), *raw_secrets(dsn)}
        secrets = tuple(
            {
                form
                for password in passwords
                for form in (
                    password,
                    urllib.parse.quote(password, safe=""),
                    urllib.parse.quote_plus(password),
                )
            }
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


def raw_secrets(dsn: str) -> tuple[str, ...]:
    """What may be a secret in ``dsn``, read from its text alone (it may be malformed).

    Generous on purpose: a URL's password runs from the first ':' of its user part to the
    *last* '@' (a raw '@' or '/' in it fools libpq), a secret option's value to the next
    option. Secrets are never shown, so reading too much only hides a little more of an
    error about a string that was wrong anyway.
    """
    found: list[str] = []
    url = _URL.match(dsn)
    if url:
        rest = dsn[url.end() :]
        userinfo = rest[: rest.rfind("@")] if "@" in rest else ""
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
        found += _QUERY_SECRET.findall(rest)
    else:
        found += _PAIR_SECRET.findall(dsn)
    secrets = {value for value in found if value}
    secrets |= {value.strip("'") for value in secrets} | {_unquote(value) for value in secrets}
    return tuple(sorted(secrets - {""}, key=len, reverse=True))


def _unquote(text: str) -> str:
    return urllib.parse.unquote(text, errors="replace")


def misread(dsn: str, given: dict[str, str]) -> bool:
    """Whether libpq read the URL ``dsn`` otherwise than meant (raw '@' or '/' in a password).

    libpq ends a URL's user part at the first '@' or '/': a password with a raw '@' leaves
    its tail in the host, one with a raw '/' turns the user into the host and the rest into
    the database. Either way the password would show where the host and database are named.
    """
    url = _URL.match(dsn)
    if not url:
        return False
    base = dsn[url.end() :].split("?", 1)[0]
    at = base.find("@")
    if at >= 0 and (base.count("@") > 1 or "/" in base[:at]):
        return True
    return any("@" in given.get(key, "") for key in ("host", "hostaddr", "port"))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every quoted or bare fragment that shares a piece with a secret as ``***``.

    For the messages of a string libpq could not read: they quote pieces of it, and which
    piece is the password is not known for sure.
    """
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")

    def hide(match: re.Match[str]) -> str:
        fragment = match.group()
        quote = fragment[0] if fragment[0] in "\"'" else ""
        inner = fragment[1:-1] if quote else fragment
        if any(_overlaps(inner, secret) for secret in secrets):
            return f"{quote}***{quote}"
        return fragment

    return mask(_FRAGMENT.sub(hide, text))


def _overlaps(fragment: str, secret: str) -> bool:
    if not fragment.strip() or fragment == "***":
        return False
    if fragment in secret or secret in fragment:
        return True
    match = difflib.SequenceMatcher(None, fragment, secret, autojunk=False).find_longest_match()
    return match.size >= min(4, len(secret))


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
