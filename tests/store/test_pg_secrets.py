"""A Postgres password never shows: not in an error, a traceback, a log, a repr or a CLI hint.

Well-formed strings, and the malformed ones a careless user writes: a raw '@', '%', '/' or space
in a URL's password, an unquoted space in key=value form. Each password is two random hex runs
around the awkward character, so a leaked tail (libpq reads what follows a raw '@' as the host)
is caught as surely as the whole password.
"""

from __future__ import annotations

import logging
import secrets
import socket
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import psycopg.conninfo
import pytest
import structlog

from actors.cli._home import store_flag
from actors.exceptions import ActorsError, StoreAuthenticationError, StoreConnectionError, UserError
from actors.store import PostgresStore


@dataclass(frozen=True)
class Secret:
    """A password: ``head + odd + tail``, where head and tail are mostly random hex."""

    odd: str
    head: str = ""
    tail: str = ""

    @classmethod
    def around(cls, odd: str) -> Secret:
        # The tail starts with a letter that is not hex: a raw '%' before it is never a
        # valid percent-encoding by chance.
        return cls(odd, f"Pw{secrets.token_hex(4)}", f"g{secrets.token_hex(4)}x")

    @property
    def text(self) -> str:
        return f"{self.head}{self.odd}{self.tail}"

    def pieces(self) -> set[str]:
        """What must never show: the password, its encodings, and each of its random runs."""
        text = self.text
        forms = {text, urllib.parse.quote(text, safe=""), urllib.parse.quote_plus(text)}
        return forms | {self.head, self.tail}


def closed_port() -> int:
    """A loopback port with nothing listening on it (connecting is refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


Form = Callable[[str, int], str]  # (password, closed port) -> connection string

FORMS: dict[str, tuple[str, Form]] = {
    # URLs, well-formed
    "url": ("", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url percent-encoded @ % / space": (
        "@%/ ",
        lambda p, port: f"postgresql://u:{urllib.parse.quote(p, safe='')}@127.0.0.1:{port}/db",
    ),
    "url postgres scheme": ("", lambda p, port: f"postgres://u:{p}@127.0.0.1:{port}/db"),
    "url raw quote": ("'", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw backslash": ("\\", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url unicode": ("é✓", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw colon": (":", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw ?": ("?", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url password in query": (
        "",
        lambda p, port: f"postgresql://u@127.0.0.1:{port}/db?password={p}",
    ),
    # URLs, malformed
    "url raw @": ("@", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url two raw @": ("@a@", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw %": ("%", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url %ff, not UTF-8": ("%ff", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url trailing %": ("", lambda p, port: f"postgresql://u:{p}%@127.0.0.1:{port}/db"),
    "url raw space": (" ", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw /": ("/", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url raw ? and @": ("?@", lambda p, port: f"postgresql://u:{p}@127.0.0.1:{port}/db"),
    "url query raw %": ("%", lambda p, port: f"postgresql://u@127.0.0.1:{port}/db?password={p}"),
    "url query raw space": (
        " ",
        lambda p, port: f"postgresql://u@127.0.0.1:{port}/db?password={p}",
    ),
    "url query %ff": ("%ff", lambda p, port: f"postgresql://u@127.0.0.1:{port}/db?password={p}"),
    "url query raw &": ("&", lambda p, port: f"postgresql://u@127.0.0.1:{port}/db?password={p}"),
    "url unclosed [": ("", lambda p, port: f"postgresql://u:{p}@[::1/db"),
    # key=value, well-formed
    "kv": ("", lambda p, port: f"host=127.0.0.1 port={port} user=u password={p} dbname=db"),
    "kv quoted space": (
        " ",
        lambda p, port: f"host=127.0.0.1 port={port} password='{p}' dbname=db",
    ),
    "kv escaped quote and backslash": (
        "'\\",
        lambda p, port: "host=127.0.0.1 port={} password='{}' dbname=db".format(
            port, p.replace("\\", "\\\\").replace("'", "\\'")
        ),
    ),
    "kv unicode": ("é✓", lambda p, port: f"host=127.0.0.1 port={port} password={p}"),
    "kv raw @ and %": ("@%", lambda p, port: f"host=127.0.0.1 port={port} password={p}"),
    # key=value, malformed
    "kv unquoted space": (" ", lambda p, port: f"host=127.0.0.1 port={port} password={p} dbname=x"),
    "kv unquoted space, =": (" x=", lambda p, port: f"host=127.0.0.1 port={port} password={p}"),
    "kv unterminated quote": ("", lambda p, port: f"host=127.0.0.1 port={port} password='{p}"),
    "kv password first, bad port": ("", lambda p, port: f"password={p} host=127.0.0.1 port=x"),
    "kv key without =": ("", lambda p, port: f"host=127.0.0.1 password={p} dbname"),
}


@pytest.fixture
def seen(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[[], str]]:
    """Everything logged (standard library and structlog) or printed while the test runs."""
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:

        def text() -> str:
            out, err = capsys.readouterr()
            return "\n".join([caplog.text, repr(logs), out, err])

        yield text


def shown(error: BaseException) -> str:
    """What a user may see of ``error``: its message, repr, traceback and everything chained."""
    parts = [str(error), repr(error), "".join(traceback.format_exception(error))]
    cause = error.__cause__ or error.__context__
    while cause is not None:
        parts += [str(cause), repr(cause), repr(getattr(cause, "__dict__", ""))]
        cause = cause.__cause__ or cause.__context__
    return "\n".join(parts)


def assert_kept(secret: Secret, *texts: str) -> None:
    for text in texts:
        leaked = sorted(piece for piece in secret.pieces() if piece and piece in text)
        assert not leaked, f"{leaked} shows in: {text[:400]}"


@pytest.mark.parametrize("form", list(FORMS))
def test_no_connection_string_shows_its_password(form: str, seen: Callable[[], str]) -> None:
    odd, build = FORMS[form]
    secret = Secret.around(odd)
    dsn = build(secret.text, closed_port())
    with pytest.raises(ActorsError) as caught:
        PostgresStore(dsn, connect_timeout=2)
    error = caught.value
    assert isinstance(error, UserError | StoreConnectionError), shown(error)
    # The driver's exception (which holds the string) is not chained, nor printed with it.
    assert error.__cause__ is None
    assert error.__context__ is None
    assert_kept(secret, shown(error), store_flag(None, dsn), seen())


def test_a_malformed_url_says_how_to_write_it() -> None:
    for password in ("a@b-secret", "a/b-secret", "a%b-secret", "a b-secret"):
        with pytest.raises(UserError, match=r"percent-encoded.*%40") as caught:
            PostgresStore(f"postgresql://u:{password}@127.0.0.1:{closed_port()}/db")
        assert "b-secret" not in str(caught.value)
    with pytest.raises(UserError, match="single quotes") as caught:
        PostgresStore("host=127.0.0.1 password=a b-secret")
    assert "b-secret" not in str(caught.value)


def test_an_unknown_option_is_still_named() -> None:
    with pytest.raises(UserError, match='invalid connection option "bogus"'):
        PostgresStore("host=127.0.0.1 bogus=1 password=hunter2-secret")


# -- against the real server ----------------------------------------------------------------


@pytest.fixture
def role(postgres_dsn: str) -> Iterator[tuple[str, Secret]]:
    """A login role whose password holds every awkward character, dropped after the test."""
    name = f"actors_odd_{secrets.token_hex(4)}"
    secret = Secret.around("@%/ '\\é:?#&=")
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                psycopg.sql.Identifier(name), psycopg.sql.Literal(secret.text)
            )
        )
        try:
            yield name, secret
        finally:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (name,),
            )
            for drop in ("DROP OWNED BY {}", "DROP ROLE {}"):
                admin.execute(psycopg.sql.SQL(drop).format(psycopg.sql.Identifier(name)))


def given(postgres_dsn: str) -> dict[str, str]:
    return {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(postgres_dsn).items()}


@pytest.mark.parametrize("form", ["url", "kv"])
def test_an_odd_password_opens_the_store_and_never_shows(
    postgres_dsn: str,
    role: tuple[str, Secret],
    form: str,
    seen: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    name, secret = role
    where = given(postgres_dsn)
    if form == "url":
        quoted = urllib.parse.quote(secret.text, safe="")
        dsn = f"postgresql://{name}:{quoted}@{where['host']}:{where['port']}/{where['dbname']}"
    else:
        dsn = psycopg.conninfo.make_conninfo(postgres_dsn, user=name, password=secret.text)
    with PostgresStore(dsn, schema=f"t_{secrets.token_hex(6)}", connect_timeout=5) as store:
        with pytest.raises(ActorsError) as caught:
            store.load("no-such-session")
        texts = [repr(store), store.url, shown(caught.value), store_flag(None, dsn)]
    assert_kept(secret, *texts, seen())


@pytest.mark.parametrize("form", ["url", "kv"])
def test_a_refused_odd_password_never_shows(
    postgres_dsn: str,
    role: tuple[str, Secret],
    form: str,
    seen: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    name, _ = role
    wrong = Secret.around("@% '\\é")
    where = given(postgres_dsn)
    if form == "url":
        quoted = urllib.parse.quote(wrong.text, safe="")
        dsn = f"postgresql://{name}:{quoted}@{where['host']}:{where['port']}/{where['dbname']}"
    else:
        dsn = psycopg.conninfo.make_conninfo(postgres_dsn, user=name, password=wrong.text)
    with pytest.raises(StoreAuthenticationError) as caught:
        PostgresStore(dsn, connect_timeout=5)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    assert_kept(wrong, shown(caught.value), seen())
