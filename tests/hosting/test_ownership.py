"""A session has one writer: the runtime that runs it holds it in its store."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Runtime
from actors.exceptions import SessionBusyError
from actors.store import SQLiteStore
from actors.testing import ScriptedModel

BOUND = 30.0


def _chat() -> Agent[Any]:
    return Agent("chat", model=ScriptedModel(["one", "two", "three"], per_agent=True))


def test_a_session_live_in_one_runtime_is_refused_to_another(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as mine, SQLiteStore(db) as theirs:
        with Runtime() as first, Runtime() as second:
            ref = first.open_session(_chat(), session_id="u1", store=mine)
            ref.run("hello", timeout=BOUND)
            before = theirs.load("u1")
            with pytest.raises(SessionBusyError):
                second.open_session(_chat(), session_id="u1", store=theirs)
            with pytest.raises(SessionBusyError):
                second.restore("u1", store=theirs, agents=[_chat()])
            assert second.live_agents() == 0
            assert theirs.load("u1") == before  # nothing written
        # Its runtime gone, the session is anyone's.
        with Runtime() as third:
            again = third.open_session(_chat(), session_id="u1", store=theirs)
            assert again.run("again", timeout=BOUND).output == "two"


def test_a_sleeping_session_may_be_woken_by_another_runtime(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with (
        SQLiteStore(db) as mine,
        SQLiteStore(db) as theirs,
        Runtime() as first,
        Runtime() as second,
    ):
        ref = first.open_session(_chat(), session_id="u1", store=mine)
        ref.run("hello", timeout=BOUND)
        assert ref.passivate()
        other = second.open_session(_chat(), session_id="u1", store=theirs)
        assert other.run("over here", timeout=BOUND).output == "two"
        # The first runtime's ref now finds the session held elsewhere: a typed error.
        with pytest.raises(SessionBusyError):
            ref.run("back here?", timeout=BOUND)


def test_a_session_woken_as_it_falls_asleep_stays_held(tmp_path: Path) -> None:
    # A message that arrives while a session that fell asleep is being released wakes it; the
    # activation must claim the session after that release, or the live session would be held
    # by nobody and another runtime could write it too.
    db = tmp_path / "s.db"
    with SQLiteStore(db) as mine, SQLiteStore(db) as theirs, Runtime(idle_after=0) as rt:
        acquire, release = mine.acquire, mine.release
        acquired = threading.Event()
        woken: list[Any] = []
        early: list[bool] = []
        released = threading.Event()

        def acquire_and_tell(session_id: str) -> None:
            acquire(session_id)
            acquired.set()

        def release_while_woken(session_id: str) -> None:
            if not woken:
                acquired.clear()
                rt._host.virtual.idle_after = None  # it stays awake after this wake
                woken.append(ref.run_async("again"))
                # Give an activation that does not wait for this release the time to claim
                # the session first (1 s; it takes milliseconds): it must not.
                early.append(acquired.wait(1.0))
            release(session_id)
            released.set()

        mine.acquire = acquire_and_tell  # type: ignore[method-assign]
        mine.release = release_while_woken  # type: ignore[method-assign]
        ref = rt.open_session(_chat(), session_id="u1", store=mine)
        ref.run("hello", timeout=BOUND)  # then it falls asleep at once (idle_after=0)
        assert released.wait(BOUND)
        assert woken[0].result(BOUND).output == "two"
        assert early == [False]
        with pytest.raises(SessionBusyError):
            theirs.acquire("u1")
