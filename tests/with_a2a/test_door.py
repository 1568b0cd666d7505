"""The A2A door of a served agent, driven by the SDK's own client over a loopback socket."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from actors.host.conformance import PNG
from actors.serve import a2a_public_paths, a2a_routes, create_app
from actors.store import SQLiteStore
from tests.serve.agents import SECRET, make_agent, tool_context
from tests.serve.live import live_server


@pytest.fixture
def context() -> Iterator[dict[str, Any]]:
    ctx = tool_context()
    yield ctx
    ctx["gate"].set()


@pytest.fixture
def served(tmp_path: Path, context: dict[str, Any]) -> Iterator[str]:
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(
        make_agent(),
        store,
        tool_context=context,
        rate_limit=None,
        routes=a2a_routes(),
        public_paths=a2a_public_paths(),
    )
    with live_server(app) as url:
        yield url


def _send(
    url: str,
    text: str,
    *,
    task: Task | None = None,
    context_id: str | None = None,
    streaming: bool = True,
    **headers: str,
) -> list[StreamResponse]:
    """Send ``text`` (on ``task``, or in ``context_id``, when given) with the SDK's client."""

    async def go() -> list[StreamResponse]:
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            config = ClientConfig(httpx_client=http, streaming=streaming)
            client = await create_client(url, client_config=config)
            message = new_text_message(
                text,
                role=Role.ROLE_USER,
                task_id=task.id if task else None,
                context_id=task.context_id if task else context_id,
            )
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    return asyncio.run(go())


def _final_task(url: str, responses: list[StreamResponse], **headers: str) -> Task:
    """The task as the server's tasks/get gives it after the responses."""
    task_id = next(
        r.task.id if r.HasField("task") else r.status_update.task_id
        for r in responses
        if r.HasField("task") or r.HasField("status_update")
    )

    async def go() -> Task:
        async with httpx.AsyncClient(timeout=30, headers=headers) as http:
            client = await create_client(url, client_config=ClientConfig(httpx_client=http))
            return await client.get_task(GetTaskRequest(id=task_id))

    return asyncio.run(go())


def _events(responses: list[StreamResponse]) -> list[dict[str, Any]]:
    """Our stream events, as the door sends them in the metadata of status updates."""
    out = []
    for response in responses:
        if response.HasField("status_update") and "actors_event" in response.status_update.metadata:
            out.append(MessageToDict(response.status_update.metadata)["actors_event"])
    return out


def test_the_card_is_public_and_says_where_and_how_to_talk(tmp_path: Path) -> None:
    app = create_app(
        make_agent(),
        SQLiteStore(tmp_path / "s.sqlite"),
        rate_limit=None,
        token="tk",
        routes=a2a_routes(bearer=True),
        public_paths=a2a_public_paths(),
    )
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        card = http.get("/.well-known/agent-card.json").json()  # no token needed
        assert card["name"] == "assistant"
        assert card["description"] == "A test assistant."
        assert card["supportedInterfaces"][0]["url"] == f"{url}/a2a"
        assert card["capabilities"]["streaming"] is True
        assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
        # The methods need the token, as the rest of the API does.
        refused = http.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"})
        assert refused.status_code == 401
        responses = _send(url, "token", streaming=False, authorization="Bearer tk")
        done = _final_task(url, responses, authorization="Bearer tk")
        assert done.status.state == TaskState.TASK_STATE_COMPLETED


def test_a_sent_message_is_a_run_of_a_session_named_by_its_context(served: str) -> None:
    responses = _send(served, "world", streaming=False)
    task = responses[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert artifact.name == "result"
    assert artifact.parts[0].text == "Hello, world!"
    # The context is a session of the JSON API, with the run in its transcript.
    with httpx.Client(base_url=served, timeout=30) as http:
        session = http.get(f"/sessions/{task.context_id}")
        assert session.status_code == 200
        transcript = http.get(f"/sessions/{task.context_id}/transcript").json()
        assert [m["content"] for m in transcript["messages"]][-2:] == ["world", "Hello, world!"]
    # A new task in the same context is the session's next run.
    follow = _send(served, "again", context_id=task.context_id, streaming=False)[-1].task
    assert follow.id != task.id
    assert follow.context_id == task.context_id
    with httpx.Client(base_url=served, timeout=30) as http:
        transcript = http.get(f"/sessions/{task.context_id}/transcript").json()
        contents = [m["content"] for m in transcript["messages"]]
        assert contents[-4:] == ["world", "Hello, world!", "again", "Hello, again!"]
    # No context given: a new session.
    other = _send(served, "again", streaming=False)[-1].task
    assert other.context_id != task.context_id


def test_a_streamed_task_carries_the_trees_events_then_the_result(served: str) -> None:
    responses = _send(served, "team")
    events = _events(responses)
    kinds = [e["kind"] for e in events]
    assert "subagent_spawned" in kinds
    assert "subagent_finished" in kinds
    # The subagent's own text deltas come through, under its path in the tree.
    assert any(e["kind"] == "text_delta" and len(e["path"]) == 2 for e in events)
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    artifacts = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert artifacts[-1].artifact.parts[0].text.startswith("Finished: ")
    # tasks/get gives the same ending.
    task = _final_task(served, responses)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == artifacts[-1].artifact.parts[0].text


def test_an_approval_is_input_required_and_the_next_message_answers_it(served: str) -> None:
    first = _send(served, "approve")
    asked = first[-1].status_update
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    text = "\n".join(p.text for p in asked.status.message.parts if p.HasField("text"))
    assert "Allow the tool 'delete_file' to run?" in text
    [request] = MessageToDict(asked.status.message.metadata)["actors_requests"]
    assert request["kind"] == "approval"
    task = _final_task(served, first)
    # The tool has not run: approval is deny-by-default until answered.
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    second = _send(served, "yes", task=task)
    done = _final_task(served, second)
    assert done.id == task.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[-1].parts[0].text == "Finished: deleted /tmp/x"


def test_anything_but_yes_denies_the_approval(served: str) -> None:
    task = _final_task(served, _send(served, "approve"))
    done = _final_task(served, _send(served, "not that file", task=task))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    answer = done.artifacts[-1].parts[0].text
    assert answer.startswith("Finished: ")
    assert "deleted" not in answer
    assert "not that file" in answer


def test_cancelling_a_task_cancels_its_run_and_frees_the_session(
    served: str, context: dict[str, Any]
) -> None:
    async def go() -> tuple[Task, list[str]]:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await create_client(served, client_config=ClientConfig(httpx_client=http))
            message = new_text_message("wait", role=Role.ROLE_USER)
            task_id = ""
            stream = client.send_message(SendMessageRequest(message=message))
            async for response in stream:
                if response.HasField("task"):
                    task_id = response.task.id
                events = _events([response])
                if events and events[0]["kind"] == "tool_call_started":
                    break  # the run waits at the gate: cancel it now
            await stream.aclose()
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            return cancelled, []

    cancelled, _ = asyncio.run(go())
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    # The session is free while the tool still waits at the gate: the run was cancelled.
    again = _send(served, "after", context_id=cancelled.context_id, streaming=False)
    assert again[-1].task.status.state == TaskState.TASK_STATE_COMPLETED
    assert again[-1].task.artifacts[0].parts[0].text == "Hello, after!"
    with httpx.Client(base_url=served, timeout=30) as http:
        transcript = http.get(f"/sessions/{cancelled.context_id}/transcript").json()
        assert "wait" in [m["content"] for m in transcript["messages"]]


def test_the_tool_context_never_leaves_the_server(served: str) -> None:
    responses = _send(served, "peek")
    assert SECRET not in str(responses)
    assert SECRET not in str(_final_task(served, responses))


def _send_data(url: str, data: dict[str, Any], task: Task) -> list[StreamResponse]:
    """Send a message with one data part on ``task``."""
    from a2a.helpers import new_data_part
    from a2a.types import Message

    async def go() -> list[StreamResponse]:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await create_client(url, client_config=ClientConfig(httpx_client=http))
            message = Message(
                message_id="m-data",
                role=Role.ROLE_USER,
                task_id=task.id,
                context_id=task.context_id,
                parts=[new_data_part(data)],
            )
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    return asyncio.run(go())


def test_answers_by_request_id_and_a_malformed_one_asks_again(served: str) -> None:
    task = _final_task(served, _send(served, "approve"))
    # A malformed answer changes nothing: the task still asks, and nothing ran.
    bad = _send_data(served, {"answers": {"some-id": {"ok": "perhaps", "extra": 1}}}, task)
    again = _final_task(served, bad)
    assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    note = again.status.message.parts[0].text
    assert note.startswith("That answer was not valid")
    [request] = MessageToDict(again.status.message.metadata)["actors_requests"]
    done = _final_task(served, _send_data(served, {"answers": {request["id"]: True}}, task))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[-1].parts[0].text == "Finished: deleted /tmp/x"


def test_a_second_task_on_a_running_session_fails_and_the_first_goes_on(
    served: str, context: dict[str, Any]
) -> None:
    async def go() -> tuple[Task, list[StreamResponse]]:
        async with httpx.AsyncClient(timeout=30) as http:
            client = await create_client(served, client_config=ClientConfig(httpx_client=http))
            stream = client.send_message(
                SendMessageRequest(message=new_text_message("wait", role=Role.ROLE_USER))
            )
            first: Task | None = None
            async for response in stream:
                if response.HasField("task"):
                    first = response.task
                events = _events([response])
                if events and events[0]["kind"] == "tool_call_started":
                    break  # the first run holds the session, waiting at the gate
            assert first is not None
            second = await asyncio.to_thread(
                _send, served, "hi", context_id=first.context_id, streaming=False
            )
            context["gate"].set()
            rest = [r async for r in stream]
            return first, [*second, *rest]

    first, responses = asyncio.run(go())
    refused = responses[0].task
    assert refused.status.state == TaskState.TASK_STATE_FAILED
    assert "running another run" in refused.status.message.parts[0].text
    done = _final_task(served, [StreamResponse(task=first)])
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[-1].parts[0].text == "Finished: the gate opened"


def test_an_a2a_0_3_client_is_understood_too(served: str) -> None:
    with httpx.Client(base_url=served, timeout=30) as http:
        card = http.get("/.well-known/agent-card.json").json()
        assert card["url"] == f"{served}/a2a"  # the 0.3 fields, beside the 1.0 ones
        assert card["protocolVersion"] == "0.3"
        message = {
            "role": "user",
            "messageId": "m-0.3",
            "kind": "message",
            "parts": [{"kind": "text", "text": "old friend"}],
        }
        answer = http.post(
            "/a2a",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {"message": message},
            },
        ).json()
    task = answer["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0] == {"kind": "text", "text": "Hello, old friend!"}


def test_a_run_that_fails_is_a_failed_task_naming_the_error(tmp_path: Path) -> None:
    from actors import Agent
    from actors.exceptions import ModelHTTPError
    from actors.testing import FunctionModel

    def broken(_messages: Any, _tools: Any) -> Any:
        raise ModelHTTPError("the provider is down", status_code=503)

    app = create_app(
        Agent("broken", model=FunctionModel(broken)),
        SQLiteStore(tmp_path / "s.sqlite"),
        rate_limit=None,
        routes=a2a_routes(),
        public_paths=a2a_public_paths(),
    )
    with live_server(app) as url:
        task = _final_task(url, _send(url, "hello"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = task.status.message.parts[0].text
    assert text.startswith("RunFailedError: ")
    assert "the provider is down" in text


def _send_parts(url: str, parts: list[Part]) -> list[StreamResponse]:
    async def go() -> list[StreamResponse]:
        async with httpx.AsyncClient(timeout=30) as http:
            config = ClientConfig(httpx_client=http, streaming=False)
            client = await create_client(url, client_config=config)
            message = new_text_message("", role=Role.ROLE_USER)
            del message.parts[:]
            message.parts.extend(parts)
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    return asyncio.run(go())


def test_a_file_part_reaches_the_agent_as_an_image_part(served: str) -> None:
    parts = [Part(text="world"), Part(raw=PNG, media_type="image/png", filename="dot.png")]
    task = _send_parts(served, parts)[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    with httpx.Client(base_url=served, timeout=30) as http:
        transcript = http.get(f"/sessions/{task.context_id}/transcript").json()
    prompt = transcript["messages"][0]["content"]
    assert prompt[0] == {"type": "text", "text": "world"}
    assert prompt[1]["type"] == "image"
    assert (prompt[1]["media_type"], prompt[1]["name"]) == ("image/png", "dot.png")
    assert base64.b64decode(prompt[1]["data"]) == PNG


def test_a_file_part_that_is_not_what_it_claims_is_refused(served: str) -> None:
    parts = [Part(text="world"), Part(raw=b"GIF89a...", media_type="image/png")]
    task = _send_parts(served, parts)[-1].task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    said = task.status.message.parts[0].text
    assert "invalid_content" in said
    assert "not a PNG" in said
    with httpx.Client(base_url=served, timeout=30) as http:
        transcript = http.get(f"/sessions/{task.context_id}/transcript").json()
    assert transcript["messages"] == []  # nothing entered the session
