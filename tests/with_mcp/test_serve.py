"""Agents served as MCP servers, called by the SDK's own client (in process, stdio, HTTP)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mcp_types
import pytest
import uvicorn
from mcp import Client, StdioServerParameters

from actors import Agent, Runtime
from actors.cli import main
from actors.exceptions import UserError
from actors.mcp import mcp_server

from .served_agents import echo, traveller

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def text(result: mcp_types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


class Person:
    """An elicitation callback that answers like a person, and remembers what it was asked."""

    def __init__(self, city: str | None = "Lisbon", approve: bool = True) -> None:
        self.city, self.approve = city, approve
        self.asked: list[str] = []

    async def __call__(
        self, _ctx: Any, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        assert isinstance(params, mcp_types.ElicitRequestFormParams)
        self.asked.append(params.message)
        if "approve" in params.requested_schema["properties"]:
            content: dict[str, Any] = {"approve": self.approve}
            if not self.approve:
                content["reason"] = "too far"
            return mcp_types.ElicitResult(action="accept", content=content)
        if self.city is None:
            return mcp_types.ElicitResult(action="decline")
        return mcp_types.ElicitResult(action="accept", content={"answer": self.city})


def test_the_served_agent_is_one_tool_that_runs_it_on_a_task() -> None:
    async def main_() -> None:
        async with Client(mcp_server(echo)) as client:
            (listed,) = (await client.list_tools()).tools
            assert listed.name == "echo"
            assert listed.description == "Repeat the task back."
            assert listed.input_schema["required"] == ["task"]
            result = await client.call_tool("echo", {"task": "hello"})
            assert not result.is_error
            assert text(result) == "echo: hello"

    anyio.run(main_)


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026 (input required) and 2025 (elicit)
def test_questions_become_elicitation(mode: str) -> None:
    async def main_() -> None:
        person = Person()
        async with Client(mcp_server(traveller), mode=mode, elicitation_callback=person) as c:
            result = await c.call_tool("traveller", {"task": "a trip"})
        assert text(result) == "travel: booked Lisbon"
        assert person.asked[0] == "Which city?"
        assert person.asked[1].startswith("Allow the tool 'book' to run?")
        assert '"city": "Lisbon"' in person.asked[1]

        refuser = Person(approve=False)
        async with Client(mcp_server(traveller), mode=mode, elicitation_callback=refuser) as c:
            result = await c.call_tool("traveller", {"task": "a trip"})
        assert text(result) == "travel: Tool call was rejected: too far"

        decliner = Person(city=None)
        async with Client(mcp_server(traveller), mode=mode, elicitation_callback=decliner) as c:
            result = await c.call_tool("traveller", {"task": "a trip"})
        assert text(result) == "gave up: no city (the user chose 'decline')"

    anyio.run(main_)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_without_elicitation_gets_an_error(mode: str) -> None:
    async def main_() -> None:
        with Runtime() as runtime:
            async with Client(mcp_server(traveller, runtime=runtime), mode=mode) as client:
                result = await client.call_tool("traveller", {"task": "a trip"})
                assert result.is_error
                assert "asked: Which city?" in text(result)
                assert "does not support elicitation" in text(result)
                empty = await client.call_tool("traveller", {"task": " "})
                assert empty.is_error
                assert "non-empty" in text(empty)

    anyio.run(main_)


def test_a_served_run_that_fails_is_an_error_result() -> None:
    from actors.testing import ScriptedModel, call

    looping = Agent("looping", model=ScriptedModel([call("nope")] * 5), max_iterations=2)

    async def main_() -> None:
        async with Client(mcp_server(looping)) as client:
            result = await client.call_tool("looping", {"task": "go"})
        assert result.is_error
        assert "ToolRetriesExceeded" in text(result) or "MaxIterationsExceeded" in text(result)

    anyio.run(main_)


def test_mcp_server_refuses_bad_arguments() -> None:
    with pytest.raises(UserError, match="serves an Agent"):
        mcp_server("echo")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="positive"):
        mcp_server(echo, timeout=0)


def test_actors_mcp_serve_over_stdio_with_the_sdks_client(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors.cli", "mcp", "serve", str(HERE / "served_agents.py") + ":traveller"],
        cwd=str(ROOT),
    )

    async def main_() -> None:
        person = Person(city="Oslo")
        with open(tmp_path / "stderr.log", "w") as log, anyio.fail_after(40):
            async with Client(_stdio(params, log), elicitation_callback=person) as client:
                (listed,) = (await client.list_tools()).tools
                assert listed.name == "traveller"
                result = await client.call_tool("traveller", {"task": "a trip"})
                assert text(result) == "travel: booked Oslo"
        assert "serving 'traveller' over MCP (stdio)" in (tmp_path / "stderr.log").read_text()

    anyio.run(main_)


def _stdio(params: StdioServerParameters, log: Any) -> Any:
    from mcp import stdio_client

    return stdio_client(params, errlog=log)


@pytest.fixture
def served_over_http() -> Iterator[str]:
    """The echo agent served over streamable HTTP on a loopback socket (in this process)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    app = mcp_server(echo).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on"))
    thread = threading.Thread(target=lambda: server.run(sockets=[sock]), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def test_an_agent_served_over_http(served_over_http: str) -> None:
    async def main_() -> None:
        with anyio.fail_after(30):
            async with Client(served_over_http) as client:
                result = await client.call_tool("echo", {"task": "over http"})
        assert text(result) == "echo: over http"

    anyio.run(main_)


def test_the_serve_command_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    target = str(HERE / "served_agents.py") + ":echo"
    assert main(["mcp", "serve", target, "--http", "nowhere"]) == 2
    assert "is not HOST:PORT" in capsys.readouterr().err
    assert main(["mcp", "serve", target, "--timeout", "0"]) == 2
    assert main(["mcp", "serve", str(HERE / "served_agents.py") + ":nobody"]) == 2
    assert "agents there: echo, traveller" in capsys.readouterr().err


def test_import_actors_does_not_import_mcp_and_a_missing_sdk_names_the_extra() -> None:
    check = (
        "import sys; import actors; assert 'mcp' not in sys.modules, 'mcp imported'\n"
        "sys.modules['mcp'] = None  # as if the SDK were not installed\n"
        "try:\n"
        "    import actors.mcp\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'actors[mcp]'" in proc.stdout
