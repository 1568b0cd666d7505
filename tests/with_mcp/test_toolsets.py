"""MCP servers as an agent's toolsets, against the toy server over stdio and loopback HTTP."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from actors import Agent, Message, RunContext, Runtime, ToolDefinition, ToolResultMessage, tool
from actors.exceptions import AgentDefinitionError, UserError
from actors.mcp import MCPServerHTTP, MCPServerStdio
from actors.testing import FunctionModel, ScriptedModel, SyncDriver, call

from .conftest import TOY, HTTPServer, pid_alive

Toy = MCPServerStdio | MCPServerHTTP


def results(messages: tuple[Message, ...]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def errors(messages: tuple[Message, ...]) -> list[bool]:
    return [m.is_error for m in messages if isinstance(m, ToolResultMessage)]


def test_the_model_sees_the_servers_tools_with_their_schemas(toy: Toy) -> None:
    seen: list[list[ToolDefinition]] = []

    def model(_messages: list[Message], tools: list[ToolDefinition]) -> str:
        seen.append(tools)
        return "done"

    with Runtime() as runtime:
        ref = runtime.spawn(Agent("a", model=FunctionModel(model), toolsets=[toy]))
        assert ref.run("list").output == "done"
    tools = {t.name: t for t in seen[0]}
    assert {"add", "slow", "grow", "crash", "dotted_name"} <= set(tools)
    assert "shout" not in tools  # only after the server adds it
    add = tools["add"]
    assert add.description == "Add two numbers."
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]


def test_calls_return_results_and_errors(toy: Toy) -> None:
    script = [
        call("add", a=2, b=3),
        call("fail", why="no reason"),
        call("dotted_name"),
        call("add", a="two", b=3),
        "done",
    ]
    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=ScriptedModel(script), toolsets=[toy])).run("go")
    out = results(result.messages)
    assert out[0] == "5"
    assert out[1].startswith("Error executing tool fail")
    assert out[2] == "dotted"  # called by its mapped name, `dotted.name` on the server
    assert "a" in out[3]  # the server's own validation error, for the model to fix
    assert errors(result.messages) == [False, True, False, True]


def test_a_slow_call_is_cancelled_on_the_server_at_the_agents_timeout(toy: Toy) -> None:
    script = [call("slow", seconds=60), call("was_cancelled"), "done"]
    agent = Agent("a", model=ScriptedModel(script), toolsets=[toy], tool_timeout=0.5)
    with Runtime() as runtime:
        result = runtime.spawn(agent).run("go")
    assert results(result.messages) == ["Tool timed out after 0.5 s", "true"]


def test_cancelling_the_run_cancels_the_call_on_the_server(toy: Toy) -> None:
    with Runtime() as runtime:
        ref = runtime.spawn(
            Agent("a", model=ScriptedModel([call("slow", seconds=60)]), toolsets=[toy])
        )
        future = ref.run_async("go")
        watcher = runtime.spawn(
            Agent("w", model=ScriptedModel([call("slow_started"), "ok"]), toolsets=[toy])
        )
        assert results(watcher.run("has it started?").messages) == ["true"]
        ref.cancel("changed my mind")
        assert future.result(20).status == "cancelled"
        check = runtime.spawn(
            Agent("b", model=ScriptedModel([call("was_cancelled"), "done"]), toolsets=[toy])
        )
        assert results(check.run("check").messages) == ["true"]


def test_a_server_that_crashes_mid_call_is_an_error_then_works_again(
    toy_stdio: MCPServerStdio,
) -> None:
    script = [call("pid"), call("crash"), call("pid"), call("add", a=1, b=1), "done"]
    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=ScriptedModel(script), toolsets=[toy_stdio])).run(
            "go"
        )
    first, crashed, second, added = results(result.messages)
    assert "closed the connection" in crashed
    assert "started again" in crashed
    assert errors(result.messages) == [False, True, False, False]
    assert first != second  # a new process
    assert not pid_alive(int(first))
    assert added == "2"


def test_an_http_server_that_dies_mid_call_is_reconnected_on_the_next_call(
    toy_http: MCPServerHTTP, http_server: HTTPServer
) -> None:
    def model(messages: list[Message], _tools: object) -> Any:
        done = results(tuple(messages))
        if not done:
            return call("crash")
        if len(done) == 1:
            http_server.restart()  # an operator brings the server back up
            return call("add", a=2, b=2)
        return "done"

    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=FunctionModel(model), toolsets=[toy_http])).run(
            "go"
        )
    crashed, added = results(result.messages)
    assert errors(result.messages) == [True, False]
    assert "toy" in crashed
    assert added == "4"


def test_a_changed_tool_list_reaches_the_next_step(toy: Toy) -> None:
    seen: list[set[str]] = []

    def model(messages: list[Message], tools: list[ToolDefinition]) -> Any:
        seen.append({t.name for t in tools})
        done = results(tuple(messages))
        if not done:
            return call("grow")
        if len(done) == 1:
            return call("shout", text="hi")
        return "done"

    with Runtime() as runtime:
        result = runtime.spawn(Agent("a", model=FunctionModel(model), toolsets=[toy])).run("go")
    assert results(result.messages) == ["grown", "HI"]
    assert "shout" not in seen[0]
    assert "shout" in seen[1]


def test_agents_and_subagents_share_one_server_process(toy_stdio: MCPServerStdio) -> None:
    child = Agent("child", model=ScriptedModel([call("pid"), "child done"]), toolsets=[toy_stdio])
    # An equal configuration (not the same object) shares the connection too.
    same = MCPServerStdio(sys.executable, [TOY], name="toy", stderr=toy_stdio.stderr)
    parent = Agent(
        "parent",
        model=ScriptedModel([call("pid"), call("child", task="pid?"), "done"]),
        toolsets=[same],
        subagents=[child],
    )
    with Runtime() as runtime:
        result = runtime.spawn(parent).run("go")
        other = runtime.spawn(
            Agent("other", model=ScriptedModel([call("pid"), "ok"]), toolsets=[toy_stdio])
        ).run("go")
        assert runtime.ref("parent").tree().children[0].status == "finished"
    parent_pid = results(result.messages)[0]
    assert results(other.messages) == [parent_pid]
    assert results(result.messages)[1] == "child done"
    assert not pid_alive(int(parent_pid))  # stopped at shutdown


def test_a_delegated_child_reaches_a_server_its_parent_does_not_use(
    toy_stdio: MCPServerStdio,
) -> None:
    helper = Agent(
        "helper", model=ScriptedModel([call("add", a=20, b=22), "42"]), toolsets=[toy_stdio]
    )

    @tool
    def ask_helper(ctx: RunContext) -> str:
        """Ask the helper."""
        return str(ctx.delegate(helper, "add"))

    lead = Agent("lead", model=ScriptedModel([call("ask_helper"), "done"]), tools=[ask_helper])
    with Runtime() as runtime:
        result = runtime.spawn(lead).run("go")
    assert results(result.messages) == ["42"]


def test_a_tool_name_collision_is_refused_at_spawn_and_a_prefix_resolves_it(
    toy_stdio: MCPServerStdio, server_log: Any
) -> None:
    def add(a: int, b: int) -> int:
        """My own add."""
        return a + b

    with Runtime() as runtime:
        with pytest.raises(AgentDefinitionError, match=r"'add' of toolset 'toy'.*prefix='toy'"):
            runtime.spawn(Agent("a", model=ScriptedModel([]), tools=[add], toolsets=[toy_stdio]))
        prefixed = MCPServerStdio(sys.executable, [TOY], prefix="toy", stderr=server_log)
        script = [call("add", a=1, b=2), call("toy_add", a=1, b=2), "done"]
        agent = Agent("b", model=ScriptedModel(script), tools=[add], toolsets=[prefixed])
        assert results(runtime.spawn(agent).run("go").messages) == ["3", "3"]
        assert runtime.live_agents() == 1  # the refused spawn left nothing behind


def test_bad_toolsets_are_clear_errors() -> None:
    server = MCPServerStdio(sys.executable, [TOY])
    with pytest.raises(AgentDefinitionError, match="pass it as toolsets="):
        Agent("a", tools=[server])  # type: ignore[list-item]
    with pytest.raises(AgentDefinitionError, match="given twice"):
        Agent("a", toolsets=[server, MCPServerStdio(sys.executable, [TOY])])
    with pytest.raises(AgentDefinitionError, match="not a toolset"):
        Agent("a", toolsets=["server.py"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="prefix"):
        MCPServerStdio("python", ["s.py"], prefix="a b")
    with pytest.raises(UserError, match="URL"):
        MCPServerHTTP("localhost:8000")
    with pytest.raises(UserError, match="list of strings"):
        MCPServerStdio("python", "server.py")


def test_a_server_that_cannot_start_fails_the_spawn(server_log: Any) -> None:
    broken = MCPServerStdio(sys.executable, ["-c", "raise SystemExit(1)"], name="broken",
                            stderr=server_log, timeout=10)  # fmt: skip
    with Runtime() as runtime:
        with pytest.raises(AgentDefinitionError, match="toolset 'broken' could not be opened"):
            runtime.spawn(Agent("a", model=ScriptedModel([]), toolsets=[broken]))
        assert runtime.live_agents() == 0


def test_an_agent_with_toolsets_needs_a_host() -> None:
    from actors.context._agent_context import AgentContext
    from actors.loop._loop import AgentLoop

    agent = Agent("a", toolsets=[MCPServerStdio(sys.executable, [TOY])])
    with pytest.raises(UserError, match="run it in a Runtime or a SyncDriver"):
        AgentLoop(agent, AgentContext("a"), model=ScriptedModel(["x"]))


def test_the_sync_driver_calls_mcp_tools_with_their_timeout(toy_stdio: MCPServerStdio) -> None:
    script = [call("add", a=2, b=5), call("slow", seconds=60), call("pid"), "done"]
    agent = Agent("a", model=ScriptedModel(script), toolsets=[toy_stdio], tool_timeout=0.5)
    with SyncDriver(agent) as driver:
        out = results(driver.run("go").messages)
    assert out[:2] == ["7", "Tool timed out after 0.5 s"]
    assert not pid_alive(int(out[2]))  # closed with the driver


def test_a_process_using_a_stdio_server_exits_and_stops_it(tmp_path: Any) -> None:
    script = (
        "import sys\n"
        "from actors import Agent, Runtime\n"
        "from actors.mcp import MCPServerStdio\n"
        "from actors.testing import ScriptedModel, call\n"
        f"server = MCPServerStdio(sys.executable, [{TOY!r}])\n"
        "runtime = Runtime()  # never shut down by the script\n"
        "agent = Agent('a', model=ScriptedModel([call('pid'), 'done']), toolsets=[server])\n"
        "result = runtime.spawn(agent).run('go')\n"
        "print(result.messages[-2].content, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=40
    )
    assert proc.returncode == 0, proc.stderr
    server_pid = int(proc.stdout.split()[-1])
    assert not pid_alive(server_pid)


def test_opening_a_toolset_from_the_event_loop_is_refused_not_a_deadlock(
    toy_stdio: MCPServerStdio,
) -> None:
    with Runtime() as runtime:

        async def spawn_from_the_loop() -> str:
            """Spawn an agent that uses MCP, from an async tool (on the runtime's loop)."""
            runtime.spawn(Agent("inner", model=ScriptedModel([]), toolsets=[toy_stdio]))
            return "spawned"

        agent = Agent(
            "outer", model=ScriptedModel([call("spawn_from_the_loop"), "done"]),
            tools=[spawn_from_the_loop],
        )  # fmt: skip
        (out,) = results(runtime.spawn(agent).run("go").messages)
    assert "thread that may block" in out
