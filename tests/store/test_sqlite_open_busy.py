"""Two processes opening a new SQLite store at once: the switch to WAL waits while busy."""

from __future__ import annotations

import sqlite3

import pytest

from actors.store import _schema


def busy() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = 5  # type: ignore[attr-defined]  # SQLITE_BUSY, as SQLite sets it
    return error


def test_a_wal_switch_answered_busy_at_once_is_tried_again() -> None:
    answers: list[object] = [busy(), busy(), "wal"]

    def statement() -> str:
        answer = answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return str(answer)

    assert _schema._when_not_busy(statement) == "wal"
    assert answers == []


def test_a_busy_file_is_given_up_after_the_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_schema, "_BUSY_TIMEOUT", 0.05)
    tries: list[int] = []

    def statement() -> str:
        tries.append(1)
        raise busy()

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _schema._when_not_busy(statement)
    assert len(tries) > 1


def test_another_error_is_not_tried_again() -> None:
    tries: list[int] = []

    def statement() -> str:
        tries.append(1)
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError, match="I/O"):
        _schema._when_not_busy(statement)
    assert tries == [1]
