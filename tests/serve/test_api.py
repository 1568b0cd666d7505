"""The JSON API in process (starlette's TestClient): sessions, runs, answers, errors, limits."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from actors import Runtime
from actors.host.conformance import PNG
from actors.serve import RateLimit, create_app
from actors.store import MemoryStore, SQLiteStore

from .agents import SECRET, make_agent, tool_context
from .live import sse_events


@pytest.fixture
def context() -> Iterator[dict[str, Any]]:
    ctx = tool_context()
    yield ctx
    ctx["gate"].set()  # a run still waiting at the gate ends


@pytest.fixture
def client(context: dict[str, Any]) -> Iterator[TestClient]:
    app = create_app(make_agent(), MemoryStore(), tool_context=context, rate_limit=None)
    with TestClient(app) as client:
        yield client


def new_session(client: TestClient, session_id: str = "s1") -> str:
    response = client.post("/sessions", json={"session_id": session_id})
    assert response.status_code == 201, response.text
    return session_id


def error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_sessions_are_created_listed_read_and_deleted(client: TestClient) -> None:
    made = client.post("/sessions", json={"session_id": "alpha", "metadata": {"user": "ada"}})
    assert made.status_code == 201
    assert made.headers["location"] == "/sessions/alpha"
    assert made.json()["status"] == "idle"
    generated = client.post("/sessions").json()["session_id"]
    listed = client.get("/sessions").json()
    assert {s["session_id"] for s in listed["sessions"]} == {"alpha", generated}
    assert listed["total"] == 2
    assert client.get("/sessions?limit=1").json()["sessions"][0]["session_id"] == generated
    assert client.get("/sessions/alpha").json()["agent"] == "assistant"

    assert client.post("/sessions", json={"session_id": "alpha"}).status_code == 409
    assert client.delete("/sessions/alpha").status_code == 204
    gone = client.get("/sessions/alpha")
    assert (gone.status_code, error_code(gone)) == (404, "session_not_found")
    # The id is free again, for a fresh session.
    assert client.post("/sessions", json={"session_id": "alpha"}).status_code == 201
    assert client.get("/sessions/alpha/transcript").json()["messages"] == []


def test_a_run_answers_as_json_and_the_session_keeps_its_transcript_usage_and_tree(
    client: TestClient,
) -> None:
    sid = new_session(client)
    first = client.post(f"/sessions/{sid}/runs", json={"prompt": "world"}).json()
    assert first["error"] is None
    assert first["result"]["status"] == "completed"
    assert first["result"]["output"] == "Hello, world!"
    client.post(f"/sessions/{sid}/runs", json={"prompt": "team"})
    messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[-1]["content"].startswith("Finished:")
    tree = client.get(f"/sessions/{sid}/tree").json()
    assert tree["agent_id"] == sid
    assert tree["status"] == "idle"
    assert [c["name"] for c in tree["children"]] == ["helper"]
    usage = client.get(f"/sessions/{sid}/usage").json()
    assert usage["total"]["requests"] == 4  # 1 + 2 for the root, 1 for the helper
    assert len(usage["agents"]) == 2
    helper_id = tree["children"][0]["agent_id"]
    child = client.get(f"/sessions/{sid}/transcript?agent_id={helper_id}").json()
    assert child["messages"][-1]["content"] == "Hello, look it up!"
    missing = client.get(f"/sessions/{sid}/transcript?agent_id=nobody")
    assert (missing.status_code, error_code(missing)) == (404, "agent_not_found")


def test_an_approval_is_listed_answered_and_cannot_be_answered_twice(client: TestClient) -> None:
    sid = new_session(client)
    parked = client.post(f"/sessions/{sid}/runs", json={"prompt": "approve"}).json()["result"]
    assert parked["status"] == "suspended"
    (request,) = client.get(f"/sessions/{sid}/requests").json()["requests"]
    assert request["kind"] == "approval"
    assert request == parked["requests"][0]
    done = client.post(f"/sessions/{sid}/answers", json={"answers": {request["id"]: True}})
    assert done.json()["result"]["output"] == "Finished: deleted /tmp/x"
    assert client.get(f"/sessions/{sid}/requests").json()["requests"] == []
    again = client.post(f"/sessions/{sid}/answers", json={"answers": {request["id"]: True}})
    assert (again.status_code, error_code(again)) == (409, "unknown_request")


def test_a_denied_approval_never_runs_the_tool(client: TestClient) -> None:
    sid = new_session(client)
    client.post(f"/sessions/{sid}/runs", json={"prompt": "approve"})
    (request,) = client.get(f"/sessions/{sid}/requests").json()["requests"]
    answer = {"ok": False, "reason": "not that file"}
    done = client.post(f"/sessions/{sid}/answers", json={"answers": {request["id"]: answer}})
    output = done.json()["result"]["output"]
    assert "deleted" not in output
    assert "not that file" in output


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "bad_json"),
        (b"\xff\xfe", "bad_json"),
        (b'{"prompt": NaN}', "bad_json"),
        (b"[1, 2]", "invalid_body"),
        (b'{"prompt": 3}', "invalid_body"),
        (b'{"text": "hi"}', "invalid_body"),
        (b'{"prompt": []}', "invalid_content"),
        (
            b'{"prompt": [{"type": "image", "media_type": "image/png", "data": "AAAA"}]}',
            "invalid_content",
        ),
        (b'{"prompt": [{"type": "video", "data": "AAAA"}]}', "invalid_content"),
    ],
)
def test_a_bad_body_is_a_400_with_a_code_and_changes_nothing(
    client: TestClient, body: bytes, code: str
) -> None:
    sid = new_session(client)
    response = client.post(
        f"/sessions/{sid}/runs", content=body, headers={"content-type": "application/json"}
    )
    assert (response.status_code, error_code(response)) == (400, code)
    assert response.headers["content-type"] == "application/json"
    assert client.get(f"/sessions/{sid}/transcript").json()["messages"] == []


def test_a_prompt_of_parts_runs_and_the_transcript_keeps_them(client: TestClient) -> None:
    sid = new_session(client)
    image = {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    prompt = [{"type": "text", "text": "world"}, image]
    done = client.post(f"/sessions/{sid}/runs", json={"prompt": prompt}).json()
    assert done["result"]["output"] == "Hello, world!"
    first = client.get(f"/sessions/{sid}/transcript").json()["messages"][0]
    assert first["content"] == prompt
    assert client.post(f"/sessions/{sid}/steer", json={"message": [image]}).status_code < 300


def test_unknown_sessions_routes_and_ids_are_typed_errors(client: TestClient) -> None:
    for method, path in [
        ("GET", "/sessions/nobody"),
        ("GET", "/sessions/nobody/tree"),
        ("GET", "/sessions/nobody/transcript"),
        ("POST", "/sessions/nobody/runs"),
        ("POST", "/sessions/nobody/cancel"),
        ("DELETE", "/sessions/nobody"),
    ]:
        response = client.request(method, path, json={"prompt": "hi"})
        assert (response.status_code, error_code(response)) == (404, "session_not_found"), path
    assert error_code(client.get("/sessions/bad%20id")) == "bad_session_id"
    assert error_code(client.get("/nowhere")) == "not_found"
    assert error_code(client.put("/sessions")) == "method_not_allowed"
    # A run on an unknown session creates nothing.
    assert client.get("/sessions").json()["total"] == 0


def test_a_body_over_the_limit_is_a_413(context: dict[str, Any]) -> None:
    app = create_app(make_agent(), MemoryStore(), max_body=1000, rate_limit=None)
    with TestClient(app) as client:
        sid = new_session(client)
        big = {"prompt": "x" * 2000}
        response = client.post(f"/sessions/{sid}/runs", json=big)
        assert (response.status_code, error_code(response)) == (413, "body_too_large")

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it comes
            yield b'{"prompt": "'
            for _ in range(20):
                yield b"y" * 100
            yield b'"}'

        response = client.post(f"/sessions/{sid}/runs", content=chunks())
        assert (response.status_code, error_code(response)) == (413, "body_too_large")
        assert client.get(f"/sessions/{sid}/transcript").json()["messages"] == []


def test_a_client_past_its_rate_is_a_429_with_retry_after() -> None:
    app = create_app(make_agent(), MemoryStore(), rate_limit=RateLimit(per_second=0.01, burst=3))
    with TestClient(app) as client:
        codes = [client.get("/sessions").status_code for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        refused = client.get("/sessions")
        assert error_code(refused) == "rate_limited"
        assert int(refused.headers["retry-after"]) >= 1
        assert client.get("/healthz").status_code == 200  # the health check is never limited


def test_a_second_run_on_a_busy_session_is_a_409_and_other_sessions_run(
    client: TestClient, context: dict[str, Any]
) -> None:
    sid = new_session(client)
    other = new_session(client, "s2")
    outcome: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: outcome.update(
            client.post(f"/sessions/{sid}/runs", json={"prompt": "wait"}).json()
        )
    )
    first.start()
    # The run holds the session once its tool call is in the tree.
    tree: dict[str, Any] = {}
    while tree.get("tool") != "wait_gate":
        tree = client.get(f"/sessions/{sid}/tree").json()
    busy = client.post(f"/sessions/{sid}/runs", json={"prompt": "again"})
    assert (busy.status_code, error_code(busy)) == (409, "run_in_progress")
    assert client.get(f"/sessions/{sid}").json()["status"] == "running"
    ran = client.post(f"/sessions/{other}/runs", json={"prompt": "there"}).json()
    assert ran["result"]["output"] == "Hello, there!"
    context["gate"].set()
    first.join(30)
    assert outcome["result"]["output"] == "Finished: the gate opened"
    after = client.post(f"/sessions/{sid}/runs", json={"prompt": "again"}).json()
    assert after["result"]["output"] == "Hello, again!"


def test_cancel_ends_the_run_in_progress(client: TestClient, context: dict[str, Any]) -> None:
    sid = new_session(client)
    outcome: dict[str, Any] = {}
    first = threading.Thread(
        target=lambda: outcome.update(
            client.post(f"/sessions/{sid}/runs", json={"prompt": "wait"}).json()
        )
    )
    first.start()
    tree: dict[str, Any] = {}
    while tree.get("tool") != "wait_gate":
        tree = client.get(f"/sessions/{sid}/tree").json()
    assert client.post(f"/sessions/{sid}/cancel", json={"reason": "enough"}).status_code == 202
    first.join(30)
    assert outcome["result"]["status"] == "cancelled"
    context["gate"].set()


def test_steering_an_idle_session_joins_the_next_run(client: TestClient) -> None:
    sid = new_session(client)
    assert client.post(f"/sessions/{sid}/steer", json={"message": "by the way"}).status_code == 202
    client.post(f"/sessions/{sid}/runs", json={"prompt": "hi"})
    messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
    assert [m.get("content") for m in messages] == ["by the way", "hi", "Hello, hi!"]


def test_lone_surrogates_become_replacement_characters_and_poison_nothing(
    client: TestClient,
) -> None:
    sid = new_session(client)
    body = b'{"prompt": "a\\ud800b \\udfff", "\\ud83d": 1}'
    response = client.post(
        f"/sessions/{sid}/runs", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["result"]["output"] == "Hello, a\ufffdb \ufffd!"
    # A pair stays a pair; the session goes on.
    emoji = client.post(f"/sessions/{sid}/runs", content=b'{"prompt": "\\ud83d\\ude00"}')
    assert emoji.json()["result"]["output"] == "Hello, \U0001f600!"
    messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
    assert messages[0]["content"] == "a\ufffdb \ufffd"
    steered = client.post(f"/sessions/{sid}/steer", content=b'{"message": "\\udc00"}')
    assert steered.status_code == 202
    assert client.post("/sessions", content=b'{"metadata": {"k": "\\ud800"}}').status_code == 201


def test_the_tool_context_never_leaves_the_server(
    client: TestClient, context: dict[str, Any]
) -> None:
    sid = new_session(client)
    seen: list[str] = []
    ran = client.post(f"/sessions/{sid}/runs", json={"prompt": "peek"})
    seen.append(ran.text)
    assert ran.json()["result"]["output"] == f"Finished: a secret of {len(SECRET)} characters"
    with client.stream(
        "POST",
        f"/sessions/{sid}/runs",
        json={"prompt": "peek"},
        headers={"accept": "text/event-stream"},
    ) as streamed:
        seen.append(streamed.read().decode())
    client.post(f"/sessions/{sid}/runs", json={"prompt": "approve"})
    for path in ["", "/tree", "/usage", "/requests", "/transcript"]:
        seen.append(client.get(f"/sessions/{sid}{path}").text)
    seen += [client.get("/sessions").text, client.get("/agent").text]
    seen.append(client.get("/openapi.json").text)
    for text in seen:
        assert SECRET not in text
        assert "gate" not in text.replace("wait_gate", "")


def test_streamed_events_name_their_agent_and_path_and_end_with_the_result(
    client: TestClient,
) -> None:
    sid = new_session(client)
    with client.stream(
        "POST",
        f"/sessions/{sid}/runs",
        json={"prompt": "team"},
        headers={"accept": "text/event-stream"},
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(response.iter_lines()))
    assert [e["id"] for e in events] == list(range(len(events)))
    assert events[0]["event"] == "run_started"
    assert events[0]["data"]["run_id"] == response.headers["x-run-id"]
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "run_ended"
    assert {"subagent_spawned", "subagent_finished", "tool_call_started", "text_delta"} <= set(
        kinds
    )
    spawned = next(e["data"] for e in events if e["event"] == "subagent_spawned")
    child_text = "".join(
        e["data"]["text"]
        for e in events
        if e["event"] == "text_delta" and e["data"]["agent_id"] == spawned["child_id"]
    )
    assert child_text == "Hello, look it up!"
    child_delta = next(
        e["data"] for e in events if e["data"].get("agent_id") == spawned["child_id"]
    )
    assert child_delta["path"] == [sid, spawned["child_id"]]
    assert events[-1]["data"]["result"]["output"].startswith("Finished:")


def test_sessions_of_another_agent_in_the_store_are_not_served(tmp_path: Any) -> None:
    from actors import Agent
    from actors.testing import ScriptedModel

    store = SQLiteStore(tmp_path / "s.sqlite")
    with Runtime() as runtime:
        other = runtime.open_session(
            Agent("other", model=ScriptedModel(["hi"])), session_id="theirs", store=store
        )
        other.run("hello")
    with TestClient(create_app(make_agent(), store, rate_limit=None)) as client:
        assert client.get("/sessions").json()["total"] == 0
        assert client.get("/sessions/theirs").status_code == 404
        assert client.post("/sessions/theirs/runs", json={"prompt": "x"}).status_code == 404
    store.close()


def test_an_idle_session_sleeps_in_the_store_and_wakes_on_a_request(tmp_path: Any) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    with Runtime(idle_after=3600) as runtime:
        app = create_app(make_agent(), store, runtime=runtime, rate_limit=None)
        with TestClient(app) as client:
            sid = new_session(client)
            client.post(f"/sessions/{sid}/runs", json={"prompt": "one"})
            assert runtime.ref(sid).passivate()
            assert runtime.live_agents() == 0
            # Read views come from the store: they do not wake it.
            assert len(client.get(f"/sessions/{sid}/transcript").json()["messages"]) == 2
            assert runtime.live_agents() == 0
            woke = client.post(f"/sessions/{sid}/runs", json={"prompt": "two"}).json()
            assert woke["result"]["output"] == "Hello, two!"
            assert runtime.live_agents() == 1
            assert len(client.get(f"/sessions/{sid}/transcript").json()["messages"]) == 4
    store.close()


def test_a_cold_session_from_an_earlier_process_is_served(tmp_path: Any) -> None:
    path = tmp_path / "s.sqlite"
    with SQLiteStore(path) as store, TestClient(create_app(make_agent(), store)) as client:
        sid = new_session(client)
        client.post(f"/sessions/{sid}/runs", json={"prompt": "before"})
    with SQLiteStore(path) as store, TestClient(create_app(make_agent(), store)) as client:
        after = client.post(f"/sessions/{sid}/runs", json={"prompt": "after"}).json()
        assert after["result"]["output"] == "Hello, after!"
        messages = client.get(f"/sessions/{sid}/transcript").json()["messages"]
        assert [m["content"] for m in messages] == [
            "before",
            "Hello, before!",
            "after",
            "Hello, after!",
        ]


def test_routes_mounted_beside_the_api_share_its_server_and_its_gate() -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def card(request: Request) -> Response:
        return JSONResponse({"name": request.app.state.server.agent.name})

    async def task(request: Request) -> Response:
        return JSONResponse({"sessions": len(request.app.state.server.store.list_sessions())})

    app = create_app(
        make_agent(),
        MemoryStore(),
        token="tk",
        routes=[Route("/.well-known/agent.json", card), Route("/a2a/tasks", task)],
        public_paths=["/.well-known/agent.json"],
    )
    with TestClient(app) as client:
        assert client.get("/.well-known/agent.json").json() == {"name": "assistant"}
        assert client.get("/a2a/tasks").status_code == 401
        assert client.get("/a2a/tasks", headers={"authorization": "Bearer tk"}).json() == {
            "sessions": 0
        }


def test_a_reader_gets_every_event_pushed_while_it_was_writing_the_last_batch() -> None:
    # An event pushed while the reader sent the previous batch (its generator suspended at
    # the yield) was skipped: a stream could end without its run_ended.
    import asyncio

    from actors.serve._runs import RunChannel

    async def read() -> bytes:
        channel = RunChannel("run", "session")
        channel.push("text_delta", {"text": "a"})
        reader = channel.follow(-1, keepalive=10.0)
        first = await reader.__anext__()  # the reader is now writing this batch
        channel.push("text_delta", {"text": "b"})
        channel.push("run_ended", {"result": None})
        channel.end()
        return first + b"".join([chunk async for chunk in reader])

    sent = asyncio.run(read())
    assert [line for line in sent.split(b"\n") if line.startswith(b"event:")] == [
        b"event: text_delta",
        b"event: text_delta",
        b"event: run_ended",
    ]
