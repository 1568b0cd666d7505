"""MCP both ways: an agent that uses an MCP server's tools, then that agent served over MCP.

Run it: ``python examples/mcp_tools.py`` (needs ``pip install 'actors[mcp]'``). The file is its
own MCP server too: ``python examples/mcp_tools.py server`` speaks MCP on stdin/stdout, which
is how the agent below starts it.
"""

from __future__ import annotations

import sys

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer

from actors import Agent, Runtime
from actors.mcp import MCPServerStdio, mcp_server
from actors.testing import ScriptedModel, call

# -- 1. an MCP server, written with the MCP SDK (any MCP server would do) ------------------


def run_notes_server() -> None:
    server = MCPServer("notes")
    notes = {"groceries": "eggs, flour, milk", "todo": "call Ada"}

    @server.tool()
    def list_notes() -> list[str]:
        """The titles of the notes."""
        return sorted(notes)

    @server.tool()
    def read_note(title: str) -> str:
        """The text of a note."""
        return notes[title]

    server.run()  # stdio


# -- 2. an agent that uses its tools ------------------------------------------------------


def build_agent() -> Agent:
    notes = MCPServerStdio(sys.executable, [__file__, "server"], prefix="notes")
    script = [
        call("notes_list_notes"),
        call("notes_read_note", title="groceries"),
        "You need eggs, flour and milk.",
    ]
    return Agent(
        "shopper",
        model=ScriptedModel(script * 2),  # answers twice: once here, once over MCP
        instructions="Answer from the user's notes.",
        toolsets=[notes],
    )


def main() -> None:
    agent = build_agent()
    with Runtime() as runtime:  # starts the notes server at spawn, stops it on exit
        result = runtime.spawn(agent).run("What do I need to buy?")
        print("answer:", result.output)
        for message in result.messages:
            if message.role == "tool":
                print(f"  tool: {message.content}")

        # -- 3. the same agent as an MCP server, called by the SDK's client ----------------
        async def call_it() -> None:
            server = mcp_server(agent, runtime=runtime)
            async with Client(server) as client:  # in process; stdio or HTTP work the same
                (served,) = (await client.list_tools()).tools
                print(f"served tool: {served.name}({', '.join(served.input_schema['properties'])})")
                reply = await client.call_tool(served.name, {"task": "What do I need to buy?"})
                print("over MCP:", "".join(getattr(b, "text", "") for b in reply.content))

        anyio.run(call_it)


if __name__ == "__main__":
    if sys.argv[1:] == ["server"]:
        run_notes_server()
    else:
        main()
