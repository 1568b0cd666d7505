"""``actors ... --store DSN``: the command on a PostgreSQL session store."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg.conninfo
import pytest

from actors.cli import main

HERE = Path(__file__).parent


@dataclass
class Done:
    code: int
    out: str
    err: str


@pytest.fixture
def actors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[..., Done]]:
    """``main(argv)`` in this process, with an empty ACTORS_HOME."""
    monkeypatch.chdir(HERE)
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "home"))

    def run(*args: str) -> Done:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    yield run
    sys.modules.pop("cli_agents", None)


def password(dsn: str) -> str:
    given = psycopg.conninfo.conninfo_to_dict(dsn).get("password") or os.environ["PGPASSWORD"]
    return str(given)


def test_run_list_show_and_export_on_postgres(
    actors: Callable[..., Done], postgres_dsn: str
) -> None:
    empty = actors("sessions", "list", "--store", postgres_dsn)
    assert empty.code == 0, empty.err
    assert empty.out.startswith("no sessions in postgresql://")
    ran = actors("run", "cli_agents:greeter", "hi", "--session", "pg1", "--store", postgres_dsn)
    assert ran.code == 0, ran.err
    assert ran.err == "session: pg1\n"
    listed = actors("sessions", "list", "--store", postgres_dsn)
    assert listed.out.splitlines()[1].split()[:2] == ["pg1", "greeter"]
    shown = actors("sessions", "show", "pg1", "--store", postgres_dsn)
    assert shown.code == 0, shown.err
    assert shown.out.startswith("session pg1\n")
    exported = actors("--store", postgres_dsn, "sessions", "export", "pg1")
    events = [json.loads(line) for line in exported.out.splitlines()]
    assert [e["seq"] for e in events] == list(range(len(events)))
    for done in (empty, ran, listed, shown, exported):
        assert password(postgres_dsn) not in done.out + done.err


def test_a_store_and_a_file_at_once_is_a_usage_error(
    actors: Callable[..., Done], postgres_dsn: str, tmp_path: Path
) -> None:
    done = actors("sessions", "list", "--db", str(tmp_path / "s.db"), "--store", postgres_dsn)
    assert done.code == 2
    assert done.err.splitlines()[0] == "actors: error: --db and --store name two session stores"


def test_a_refused_password_is_one_line_a_hint_and_no_secret(
    actors: Callable[..., Done], postgres_dsn: str
) -> None:
    wrong = "wrong-password-4e1f"
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, password=wrong)
    done = actors("sessions", "list", "--store", dsn)
    assert done.code == 1
    message, hint = [line for line in done.err.splitlines() if line.strip()]
    assert message.startswith("actors: error: the PostgreSQL server at ")
    assert "refused user" in message
    assert hint == "hint: check the user name and password of --store (PGPASSWORD or ~/.pgpass)"
    assert wrong not in done.out + done.err
    assert password(postgres_dsn) not in done.out + done.err


def test_a_failed_run_hints_at_the_store_without_its_password(
    actors: Callable[..., Done], postgres_dsn: str
) -> None:
    done = actors("run", "cli_agents:guarded", "x", "--session", "pg2", "--store", postgres_dsn)
    assert done.code == 0, done.err
    assert "--store postgresql://" in done.out
    assert password(postgres_dsn) not in done.out + done.err
