"""Many threads opening one session at once all get its one root agent.

A server that opens the session of each incoming request does this whenever two requests of
one user arrive together: every caller must get a ref to the same agent, whether the session
is new, only in the store, or asleep, and the store must hold one root record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, AgentRef, Runtime
from actors.exceptions import AgentDefinitionError
from actors.store import SessionStore, SQLiteStore
from actors.testing import ScriptedModel

BOUND = 30.0
CALLERS = 6
ROUNDS = 20


def _chat(name: str = "chat") -> Agent[Any]:
    return Agent(name, model=ScriptedModel(["one", "two", "three"], per_agent=True))


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "sessions.db") as sqlite:
            yield sqlite
        return
    from actors.store import PostgresStore

    with PostgresStore(request.getfixturevalue("postgres_dsn")) as postgres:
        yield postgres


def _together(*calls: Callable[[], AgentRef[Any]]) -> list[AgentRef[Any] | BaseException]:
    """Run each call on its own thread, all released at once; what each returned or raised."""
    barrier = threading.Barrier(len(calls))
    out: list[AgentRef[Any] | BaseException | None] = [None] * len(calls)

    def one(i: int, call: Callable[[], AgentRef[Any]]) -> None:
        barrier.wait(BOUND)
        try:
            out[i] = call()
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
    assert not any(t.is_alive() for t in threads), "an open_session call never returned"
    return [r for r in out if r is not None]


def _open_together(
    rt: Runtime, store: SessionStore, session_id: str, *specs: Agent[Any]
) -> list[AgentRef[Any] | BaseException]:
    chosen = specs or (_chat(),) * CALLERS
    return _together(
        *(lambda s=spec: rt.open_session(s, session_id=session_id, store=store) for spec in chosen)
    )


def _one_agent(results: list[AgentRef[Any] | BaseException], session_id: str) -> AgentRef[Any]:
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, f"{len(errors)} of {len(results)} callers failed: {errors[0]!r}"
    refs = [r for r in results if isinstance(r, AgentRef)]
    assert len(refs) == len(results)
    assert {r.agent_id for r in refs} == {session_id}
    assert all(r == refs[0] for r in refs)
    return refs[0]


def _root_records(store: SessionStore, session_id: str) -> list[str]:
    return [a.record.agent_id for a in store.load(session_id).agents if a.record.parent_id is None]


def test_a_new_session_opened_by_many_callers_at_once_is_one_agent(store: SessionStore) -> None:
    with Runtime() as rt:
        for round_ in range(ROUNDS):
            session_id = f"new-{round_}"
            ref = _one_agent(_open_together(rt, store, session_id), session_id)
            assert ref.run("hello", timeout=BOUND).output == "one"
            assert _root_records(store, session_id) == [session_id]
        assert rt.live_agents() == ROUNDS


def test_a_stored_session_opened_by_many_callers_at_once_is_one_agent(
    store: SessionStore,
) -> None:
    with Runtime() as first:
        for round_ in range(ROUNDS):
            first.open_session(_chat(), session_id=f"kept-{round_}", store=store).run(
                "hello", timeout=BOUND
            )
    with Runtime() as rt:  # a restart: the sessions are only in the store
        for round_ in range(ROUNDS):
            session_id = f"kept-{round_}"
            ref = _one_agent(_open_together(rt, store, session_id), session_id)
            result = ref.run("again", timeout=BOUND)
            assert [m.content for m in result.messages] == ["hello", "one", "again", "two"]
            assert _root_records(store, session_id) == [session_id]
        assert rt.live_agents() == ROUNDS


def test_a_sleeping_session_opened_by_many_callers_at_once_is_one_agent(
    store: SessionStore,
) -> None:
    # idle_after=0: each session falls asleep as soon as a run ends, so the callers also meet
    # a passivation under way.
    with Runtime(idle_after=0) as rt:
        for round_ in range(ROUNDS):
            session_id = f"asleep-{round_}"
            rt.open_session(_chat(), session_id=session_id, store=store).run("hello", timeout=BOUND)
            ref = _one_agent(_open_together(rt, store, session_id), session_id)
            result = ref.run("again", timeout=BOUND)
            assert [m.content for m in result.messages] == ["hello", "one", "again", "two"]
            assert _root_records(store, session_id) == [session_id]


def test_callers_with_specs_of_another_name_get_a_typed_error(store: SessionStore) -> None:
    # Whichever spec opens the new session first is its root's; a caller naming another spec
    # is told so, whether the session is live here or not, never handed the other agent.
    with Runtime() as rt:
        for round_ in range(ROUNDS):
            session_id = f"mixed-{round_}"
            specs = [_chat("chat") if i % 2 else _chat("other") for i in range(CALLERS)]
            results = _open_together(rt, store, session_id, *specs)
            (root_name,) = {a.record.name for a in store.load(session_id).agents}
            for spec, result in zip(specs, results, strict=True):
                if spec.name == root_name:
                    assert isinstance(result, AgentRef), result
                    assert result.agent_id == session_id
                    assert result.name == root_name
                else:
                    assert isinstance(result, AgentDefinitionError), result
                    assert root_name in str(result)
            assert _root_records(store, session_id) == [session_id]
