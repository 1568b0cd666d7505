"""Two servers on one PostgreSQL store: a session is served by one process at a time."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("psycopg")

from starlette.testclient import TestClient

from actors import Runtime
from actors.serve import create_app
from actors.store import PostgresStore

from .agents import make_agent


def test_a_session_moves_between_servers_once_it_sleeps(postgres_dsn: str) -> None:
    with (
        PostgresStore(postgres_dsn) as first_store,
        PostgresStore(postgres_dsn) as second_store,
        Runtime(idle_after=3600) as first_runtime,
        Runtime(idle_after=3600) as second_runtime,
    ):
        first_app = create_app(make_agent(), first_store, runtime=first_runtime, rate_limit=None)
        second_app = create_app(make_agent(), second_store, runtime=second_runtime, rate_limit=None)
        with TestClient(first_app) as first, TestClient(second_app) as second:
            sid = first.post("/sessions", json={}).json()["session_id"]
            first.post(f"/sessions/{sid}/runs", json={"prompt": "one"})
            # Live in the first process: the second refuses it, typed, and writes nothing.
            busy = second.post(f"/sessions/{sid}/runs", json={"prompt": "two"})
            assert busy.status_code == 409
            assert busy.json()["error"]["code"] == "session_busy"
            # Asleep (idle_after, here at once): any server may wake it.
            assert first_runtime.ref(sid).passivate()
            moved: dict[str, Any] = second.post(
                f"/sessions/{sid}/runs", json={"prompt": "two"}
            ).json()
            assert moved["result"]["output"] == "Hello, two!"
            messages = second.get(f"/sessions/{sid}/transcript").json()["messages"]
            assert [m["content"] for m in messages] == ["one", "Hello, one!", "two", "Hello, two!"]
            # Both list it; the first sees what the second wrote.
            assert first.get("/sessions").json()["total"] == 1
            assert len(first.get(f"/sessions/{sid}/transcript").json()["messages"]) == 4
            # The first process's sleeping copy cannot wake while the second holds it.
            back = first.post(f"/sessions/{sid}/runs", json={"prompt": "three"})
            assert back.status_code == 409, back.text
            assert back.json()["error"]["code"] == "session_busy"
