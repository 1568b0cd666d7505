"""A2AAgent: a remote A2A agent as a subagent, against the SDK's own server and ours."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

from actors import Agent, Message, RunEnded, Runtime, TextDelta
from actors.a2a import A2AAgent
from actors.exceptions import AgentDefinitionError, RemoteAgentError
from actors.serve import a2a_public_paths, a2a_routes, create_app
from actors.store import SQLiteStore
from actors.testing import FunctionModel, call
from tests.serve.agents import make_agent, tool_context
from tests.serve.live import live_server

from .live import live
from .sdk_agents import ToyExecutor, toy_app


def _boss(remote: A2AAgent) -> Agent[str]:
    """A parent whose model hands every prompt to ``remote`` and reports what came back."""

    def reply(messages: Sequence[Message], _tools: Any) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return f"boss got: {last.content}"
        return call(remote.name, task=str(getattr(last, "content", "")))

    return Agent("boss", model=FunctionModel(reply), subagents=[remote])


@pytest.fixture
def toy() -> Iterator[tuple[str, ToyExecutor]]:
    executor = ToyExecutor()
    with live(lambda url: toy_app(url, executor)) as url:
        yield url, executor


def test_a_remote_sdk_agent_answers_as_a_child_with_its_text_streamed(
    toy: tuple[str, ToyExecutor],
) -> None:
    url, _ = toy
    boss = _boss(A2AAgent(url, name="toy", description="Echoes."))
    with Runtime() as runtime:
        events = list(runtime.spawn(boss).run_stream("hello there"))
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    assert ended.result.output == "boss got: echo: hello there"
    # The remote's streamed chunks are the child's text deltas, in the tree under the boss.
    deltas = [e for e in events if isinstance(e, TextDelta) and len(e.path) == 2]
    assert "".join(e.text for e in deltas) == "echo: hello there"
    assert len(deltas) == 3


def test_a_remote_failure_is_the_childs_error_and_the_parent_lives_on(
    toy: tuple[str, ToyExecutor],
) -> None:
    url, _ = toy
    with Runtime() as runtime:
        result = runtime.spawn(_boss(A2AAgent(url, name="toy"))).run("fail now")
    assert result.completed
    assert "RemoteAgentError" in result.output
    assert "ended its task failed: the toy broke" in result.output


def test_a_silent_remote_times_out_and_its_task_is_cancelled(
    toy: tuple[str, ToyExecutor],
) -> None:
    url, executor = toy
    with Runtime() as runtime:
        result = runtime.spawn(_boss(A2AAgent(url, name="toy", timeout=0.5))).run("hang on")
    assert result.completed
    assert "ModelTimeoutError" in result.output
    assert "within 0.5 s" in result.output
    assert len(executor.cancelled) == 1  # the remote task does not run on for nobody


def test_cancelling_the_parent_cancels_the_remote_task(toy: tuple[str, ToyExecutor]) -> None:
    url, executor = toy
    with Runtime() as runtime:
        ref = runtime.spawn(_boss(A2AAgent(url, name="toy")))
        future = ref.run_async("hang on")
        assert executor.hanging.wait(30)
        ref.cancel("the user changed their mind")
        result = future.result(30)
        assert result.status == "cancelled"
        assert executor.cancel_seen.wait(30)  # the remote was told, not left running


def test_a_remote_that_wants_input_answers_with_its_question(
    toy: tuple[str, ToyExecutor],
) -> None:
    url, _ = toy
    with Runtime() as runtime:
        result = runtime.spawn(_boss(A2AAgent(url, name="toy"))).run("ask me")
    assert result.output == "boss got: The remote agent needs input to go on: which colour?"


def test_an_unreachable_remote_is_a_typed_error_not_a_hang() -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    remote = A2AAgent(f"http://127.0.0.1:{port}", name="gone", connect_timeout=5)
    with Runtime() as runtime:
        result = runtime.spawn(_boss(remote)).run("anyone?")
    assert "RemoteAgentError" in result.output
    assert "could not be reached" in result.output


def test_our_served_agent_is_a_remote_subagent_with_its_tree_streamed(tmp_path: Path) -> None:
    context = tool_context()
    app = create_app(
        make_agent(),
        SQLiteStore(tmp_path / "s.sqlite"),
        tool_context=context,
        rate_limit=None,
        token="tk",
        routes=a2a_routes(bearer=True),
        public_paths=a2a_public_paths(),
    )
    with live_server(app) as url, Runtime() as runtime:
        boss = _boss(A2AAgent(url, name="assistant", token="tk"))
        events = list(runtime.spawn(boss).run_stream("world"))
        refused = runtime.spawn(_boss(A2AAgent(url, name="assistant"))).run("no token")
    ended = events[-1]
    assert isinstance(ended, RunEnded)
    assert ended.result is not None
    assert ended.result.output == "boss got: Hello, world!"
    deltas = [e for e in events if isinstance(e, TextDelta) and len(e.path) == 2]
    assert "".join(e.text for e in deltas) == "Hello, world!"
    assert "RemoteAgentError" in refused.output
    assert "401" in refused.output


def test_a_spec_is_checked_and_its_token_never_shown() -> None:
    remote = A2AAgent("http://127.0.0.1:1", name="r", token="s3cret-token")
    assert "s3cret-token" not in repr(remote)
    assert "s3cret-token" not in repr(_boss(remote))
    assert remote.url == "http://127.0.0.1:1"
    with pytest.raises(AgentDefinitionError, match="http"):
        A2AAgent("ftp://x", name="r")
    with pytest.raises(AgentDefinitionError, match="positive"):
        A2AAgent("http://x", name="r", timeout=0)


def test_remote_agent_error_keeps_its_fields_across_pickle() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(RemoteAgentError("it failed", "http://x", "failed")))
    assert (str(error), error.url, error.state) == ("it failed", "http://x", "failed")


def test_as_a_toolset_it_is_one_tool_that_asks_the_remote(
    toy: tuple[str, ToyExecutor],
) -> None:
    url, _ = toy
    remote = A2AAgent(url, name="toy", description="Echoes.")

    offered: list[tuple[str, str]] = []

    def reply(messages: Sequence[Message], tools: Any) -> Any:
        offered.extend((t.name, t.description) for t in tools)
        last = messages[-1]
        if last.role == "tool":
            return f"{'error' if last.is_error else 'ok'}: {last.content}"
        return call("toy", task=str(getattr(last, "content", "")))

    boss = Agent("boss", model=FunctionModel(reply), toolsets=[remote])
    with Runtime() as runtime:
        ref = runtime.spawn(boss)
        assert ref.run("hi you").output == "ok: echo: hi you"
        failed = ref.run("fail please").output
    assert failed.startswith("error: ")
    assert "ended its task failed: the toy broke" in failed
    assert set(offered) == {("toy", "Echoes.")}


def test_a_server_without_an_a2a_door_is_a_typed_error(tmp_path: Path) -> None:
    app = create_app(make_agent(), SQLiteStore(tmp_path / "s.sqlite"), rate_limit=None)
    with live_server(app) as url, Runtime() as runtime:
        result = runtime.spawn(_boss(A2AAgent(url, name="assistant"))).run("hello?")
    assert result.completed
    assert "RemoteAgentError" in result.output
    assert "could not be reached" in result.output
