"""The API over a real socket (uvicorn on a loopback port): streams, disconnects, the token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

import httpx

from actors import Runtime
from actors.cli import main
from actors.serve import create_app, is_loopback, serve
from actors.store import SQLiteStore

from .agents import make_agent, tool_context
from .live import live_server, sse_events

HERE = Path(__file__).parent
STREAM = {"accept": "text/event-stream"}


@pytest.fixture
def context() -> Iterator[dict[str, Any]]:
    ctx = tool_context()
    yield ctx
    ctx["gate"].set()


def until(events: Iterator[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events up to and including the first of ``kind``."""
    seen = []
    for event in events:
        seen.append(event)
        if event["event"] == kind:
            return seen
    raise AssertionError(f"the stream ended before a {kind} event: {seen}")


def test_a_streamed_run_comes_over_the_socket_as_it_happens(
    tmp_path: Path, context: dict[str, Any]
) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, tool_context=context, rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        with client.stream(
            "POST", f"/sessions/{sid}/runs", json={"prompt": "wait"}, headers=STREAM
        ) as response:
            events = sse_events(response.iter_lines())
            # The tool call arrives while the run still waits at the gate: live, not at the end.
            seen = until(events, "tool_call_started")
            assert seen[-1]["data"]["tool_name"] == "wait_gate"
            context["gate"].set()
            rest = list(events)
        assert rest[-1]["event"] == "run_ended"
        text = "".join(e["data"]["text"] for e in rest if e["event"] == "text_delta")
        assert text == "Finished: the gate opened"
        assert [e["id"] for e in seen + rest] == list(range(len(seen) + len(rest)))
    store.close()


def test_a_client_that_leaves_mid_stream_loses_nothing_and_resumes_from_its_last_event(
    tmp_path: Path, context: dict[str, Any]
) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, tool_context=context, rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        with client.stream(
            "POST", f"/sessions/{sid}/runs", json={"prompt": "wait"}, headers=STREAM
        ) as response:
            run_id = response.headers["x-run-id"]
            seen = until(sse_events(response.iter_lines()), "tool_call_started")
        # The client is gone; the run goes on.
        assert client.get(f"/sessions/{sid}").json()["run_id"] == run_id
        context["gate"].set()
        last = seen[-1]["id"]
        with client.stream(
            "GET",
            f"/sessions/{sid}/runs/{run_id}/events",
            headers={**STREAM, "Last-Event-ID": str(last)},
        ) as again:
            rest = list(sse_events(again.iter_lines()))
        assert rest[0]["id"] == last + 1
        assert rest[-1]["event"] == "run_ended"
        assert rest[-1]["data"]["result"]["output"] == "Finished: the gate opened"
        # ... and everything is in the store.
        messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
        assert messages[-1]["content"] == "Finished: the gate opened"
        gone = client.get(f"/sessions/{sid}/runs/nope/events")
        assert gone.json()["error"]["code"] == "run_not_found"
    store.close()


def test_a_client_that_asked_for_it_cancels_its_run_by_leaving(
    tmp_path: Path, context: dict[str, Any]
) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, tool_context=context, rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        body = {"prompt": "wait", "cancel_on_disconnect": True}
        with client.stream("POST", f"/sessions/{sid}/runs", json=body, headers=STREAM) as response:
            run_id = response.headers["x-run-id"]
            until(sse_events(response.iter_lines()), "tool_call_started")
        with client.stream("GET", f"/sessions/{sid}/runs/{run_id}/events", headers=STREAM) as r:
            events = list(sse_events(r.iter_lines()))
        assert events[-1]["data"]["result"]["status"] == "cancelled"
        context["gate"].set()
        again = client.post(f"/sessions/{sid}/runs", json={"prompt": "next"})  # free again
        assert again.json()["result"]["output"] == "Hello, next!"
    store.close()


def test_an_answer_streams_the_continued_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        with client.stream(
            "POST", f"/sessions/{sid}/runs", json={"prompt": "approve"}, headers=STREAM
        ) as response:
            events = list(sse_events(response.iter_lines()))
        suspended = next(e for e in events if e["event"] == "suspended")
        request_id = suspended["data"]["request"]["id"]
        assert events[-1]["data"]["result"]["status"] == "suspended"
        body = {"answers": {request_id: {"ok": True}}}
        with client.stream(
            "POST", f"/sessions/{sid}/answers", json=body, headers=STREAM
        ) as response:
            resumed = list(sse_events(response.iter_lines()))
        kinds = [e["event"] for e in resumed]
        assert kinds[0] == "run_started"
        assert "tool_call_finished" in kinds
        assert resumed[-1]["data"]["result"]["output"] == "Finished: deleted /tmp/x"
        # An id already answered ends the stream with the error, typed.
        with client.stream(
            "POST", f"/sessions/{sid}/answers", json=body, headers=STREAM
        ) as response:
            failed = list(sse_events(response.iter_lines()))
        assert failed[-1]["data"]["error"]["type"] == "UnknownRequestError"
    store.close()


def test_with_a_token_every_api_request_needs_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, token="s3cret-token", rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": "s3cret-token"}):
            refused = client.get("/sessions", headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["www-authenticate"] == "Bearer"
        ok = {"authorization": "Bearer s3cret-token"}
        assert client.post("/sessions", json={}, headers=ok).status_code == 201
        assert client.get("/sessions", headers=ok).json()["total"] == 1
        streamed = client.post("/sessions/x/runs", json={"prompt": "hi"}, headers=STREAM)
        assert streamed.status_code == 401
        # The page and the API's description are public: they hold no data.
        assert client.get("/").status_code == 200
        assert client.get("/static/chat.js").status_code == 200
        assert client.get("/openapi.json").status_code == 200
    store.close()


def test_a_non_loopback_bind_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    from actors.exceptions import UserError

    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("example.org")
    with SQLiteStore(tmp_path / "s.sqlite") as store, pytest.raises(UserError, match="token"):
        serve(make_agent(), store, host="0.0.0.0")
    target = f"{HERE / 'agents.py'}:assistant"
    db = str(tmp_path / "cli.sqlite")
    assert main(["serve", target, "--host", "0.0.0.0", "--db", db]) == 2
    assert not Path(db).exists()  # refused before anything was opened


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_serve_command_serves_the_agent_and_its_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "home"))
    port = _free_port()
    env = {**os.environ, "ACTORS_HOME": str(tmp_path / "home"), "ACTORS_SERVE_TOKEN": "tk"}
    target = f"{HERE / 'agents.py'}:assistant"
    command = [sys.executable, "-m", "actors.cli", "serve", target, "--port", str(port)]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        banner = process.stderr.readline()  # printed before uvicorn starts
        assert f"serving 'assistant' at http://127.0.0.1:{port}/" in banner
        for line in process.stderr:  # uvicorn says when it listens
            if "Uvicorn running on" in line:
                break
        headers = {"authorization": "Bearer tk"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            made = client.post("/sessions", json={}, headers=headers)
            sid = made.json()["session_id"]
            ran = client.post(f"/sessions/{sid}/runs", json={"prompt": "cli"}, headers=headers)
            assert ran.json()["result"]["output"] == "Hello, cli!"
    finally:
        process.terminate()
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()
    # The session is in the default store, where the other commands find it.
    assert main(["sessions", "show", sid]) == 0


def test_an_app_on_a_given_runtime_leaves_it_running(tmp_path: Path) -> None:
    with Runtime() as runtime, SQLiteStore(tmp_path / "s.sqlite") as store:
        app = create_app(make_agent(), store, runtime=runtime, rate_limit=None)
        with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
            sid = client.post("/sessions", json={}).json()["session_id"]
            client.post(f"/sessions/{sid}/runs", json={"prompt": "x"})
        assert runtime.ref(sid).run("y").output == "Hello, y!"


def _post_and_leave(url: str, path: str, body: dict[str, Any]) -> None:
    """Send a JSON POST over a raw socket, then hang up without reading the answer."""
    import json

    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head + data)


def _until_free(client: httpx.Client, sid: str) -> None:
    """Wait (by asking the server) until the session runs nothing."""
    for _ in range(10_000):
        if client.get(f"/sessions/{sid}").json()["run_id"] is None:
            return
    raise AssertionError("the run never ended")


def _until_running(client: httpx.Client, sid: str) -> None:
    for _ in range(10_000):
        if client.get(f"/sessions/{sid}/tree").json()["tool"] == "wait_gate":
            return
    raise AssertionError("the run never reached its tool")


def test_a_json_client_that_leaves_cancels_its_run_only_when_it_asked(
    tmp_path: Path, context: dict[str, Any]
) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, tool_context=context, rate_limit=None)
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/sessions", json={}).json()["session_id"]
        _post_and_leave(url, f"/sessions/{sid}/runs", {"prompt": "wait"})
        _until_running(client, sid)
        context["gate"].set()  # nobody waits for the answer; the run ends anyway, stored
        _until_free(client, sid)
        messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
        assert messages[-1]["content"] == "Finished: the gate opened"

        context["gate"].clear()
        before = len(messages)
        _post_and_leave(
            url, f"/sessions/{sid}/runs", {"prompt": "wait", "cancel_on_disconnect": True}
        )
        while len(client.get(f"/sessions/{sid}/transcript").json()["messages"]) == before:
            pass  # until the run has started (its prompt is logged first)
        _until_free(client, sid)  # cancelled, with the gate still shut
        messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
        assert messages[before]["content"] == "wait"
        assert not any(str(m["content"]).startswith("Finished:") for m in messages[before:])
        context["gate"].set()
    store.close()
