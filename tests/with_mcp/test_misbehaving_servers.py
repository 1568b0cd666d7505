"""MCP servers that misbehave: a line that is not JSON-RPC, tool names that clash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Message, Runtime, ToolResultMessage
from actors.exceptions import AgentDefinitionError, UserError
from actors.mcp import MCPServerStdio
from actors.testing import ScriptedModel, call

from .conftest import TOY

OTHER = str(Path(__file__).resolve().with_name("other_server.py"))


def results(messages: tuple[Message, ...]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def test_a_line_that_is_not_json_rpc_fails_the_waiting_call_at_once(server_log: Any) -> None:
    # The tool prints a stray line, then answers only after 20 s; the call's timeout is 30 s.
    # Waiting for either would give "late" or a timeout: the call fails at once instead.
    toy = MCPServerStdio(sys.executable, [TOY], name="toy", tool_timeout=30, stderr=server_log)
    script = [call("blurt", seconds=20), call("add", a=1, b=2), "done"]
    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=ScriptedModel(script), toolsets=[toy])).run("go")
    failed, added = results(result.messages)
    assert failed.startswith("MCPProtocolError: the MCP server 'toy' wrote something that is ")
    assert "'this line is not JSON-RPC'" in failed
    assert "stderr" in failed  # says where a server's prints belong
    assert added == "3"  # the connection goes on


def test_with_nothing_configured_the_sdk_prints_nothing(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from actors import Agent, Runtime
            from actors.mcp import MCPServerStdio
            from actors.testing import ScriptedModel, call

            log = open({str(tmp_path / "server.log")!r}, "w")
            toy = MCPServerStdio(sys.executable, [{TOY!r}], stderr=log, tool_timeout=30)
            model = ScriptedModel([call("blurt", seconds=20), "done"])
            with Runtime() as runtime:
                result = runtime.spawn(Agent("a", model=model, toolsets=[toy])).run("go")
            print(result.messages[-2].content.split(":")[0])
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.stderr == ""  # no "Failed to parse JSONRPC message" with a traceback
    assert done.returncode == 0
    assert done.stdout.strip() == "MCPProtocolError"


def test_tools_of_two_servers_offered_under_one_name_are_refused_with_the_fix(
    server_log: Any,
) -> None:
    toy = MCPServerStdio(sys.executable, [TOY], name="toy", stderr=server_log)
    other = MCPServerStdio(sys.executable, [OTHER], name="other", stderr=server_log)
    agent = Agent("a", model=ScriptedModel([]), toolsets=[toy, other])
    with Runtime() as runtime:
        with pytest.raises(AgentDefinitionError) as caught:
            runtime.spawn(agent)
        message = str(caught.value)
        assert "tool 'dotted.name' (offered as 'dotted_name') of toolset 'toy'" in message
        assert "tool 'dotted_name' of toolset 'other' are both offered as 'dotted_name'" in message
        assert "prefix='other'" in message
        assert "names={'dotted_name': 'other_dotted_name'}" in message

        # Both fixes the message names work.
        for fixed in (
            MCPServerStdio(sys.executable, [OTHER], name="other", prefix="other",
                           stderr=server_log),
            MCPServerStdio(sys.executable, [OTHER], name="other", stderr=server_log,
                           names={"dotted_name": "other_dotted_name"}),
        ):  # fmt: skip
            script = [call("dotted_name"), call("other_dotted_name"), "done"]
            agent = Agent("b", model=ScriptedModel(script), toolsets=[toy, fixed])
            assert results(runtime.spawn(agent).run("go").messages) == ["dotted", "other dotted"]


def test_two_tools_of_one_server_under_one_name_need_a_name_map(server_log: Any) -> None:
    other = MCPServerStdio(sys.executable, [OTHER, "twins"], name="other", stderr=server_log)
    with Runtime() as runtime:
        with pytest.raises(AgentDefinitionError) as caught:
            runtime.spawn(Agent("a", model=ScriptedModel([]), toolsets=[other]))
        message = str(caught.value)
        assert "tools 'twin.tool' and 'twin_tool' of toolset 'other'" in message
        assert "a prefix cannot tell them apart" in message
        assert "names={'twin.tool': 'other_twin_tool'}" in message

        fixed = MCPServerStdio(sys.executable, [OTHER, "twins"], name="other", stderr=server_log,
                               names={"twin.tool": "other_twin_tool"})  # fmt: skip
        script = [call("other_twin_tool"), call("twin_tool"), "done"]
        agent = Agent("b", model=ScriptedModel(script), toolsets=[fixed])
        assert results(runtime.spawn(agent).run("go").messages) == ["twin dotted", "twin plain"]


def test_a_bad_name_map_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="letters, digits"):
        MCPServerStdio(sys.executable, [OTHER], names={"a": "b c"})
    with pytest.raises(UserError, match="offers two tools as 'x'"):
        MCPServerStdio(sys.executable, [OTHER], names={"a": "x", "b": "x"})
    with pytest.raises(UserError, match="names must map"):
        MCPServerStdio(sys.executable, [OTHER], names=["a"])  # type: ignore[arg-type]
