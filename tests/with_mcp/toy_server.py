"""A real MCP server for the tests, written with the SDK's server API.

Run as ``python toy_server.py`` (stdio) or ``python toy_server.py http FD`` (streamable HTTP on
an inherited, already listening socket, so the test owns the port and no race picks it).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer


class ToyServer(MCPServer[Any]):
    """Counts tool listings, so `grow` can wait until a client has fetched the new list."""

    listings = 0
    listed = anyio.Event()

    async def list_tools(self) -> Any:
        tools = await super().list_tools()
        ToyServer.listings += 1
        ToyServer.listed.set()
        return tools


# The SDK points fd 1 at stderr while it serves (a stray print cannot break the protocol);
# `blurt` writes past it, on a copy of the real stdout taken first, as a broken server would.
_WIRE = os.dup(1)

mcp = ToyServer("toy")
started = anyio.Event()
cancelled = anyio.Event()


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcp.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer; remembers being cancelled."""
    started.set()
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        cancelled.set()
        raise
    return "slept"


@mcp.tool()
async def was_cancelled() -> bool:
    """Whether a `slow` call was cancelled (waits up to 10 s for the cancellation to land)."""
    with anyio.move_on_after(10):
        await cancelled.wait()
    return cancelled.is_set()


@mcp.tool()
async def slow_started() -> bool:
    """Whether a `slow` call has started (waits up to 10 s for one)."""
    with anyio.move_on_after(10):
        await started.wait()
    return started.is_set()


@mcp.tool()
def fail(why: str) -> str:
    """Always fails."""
    raise ValueError(why)


@mcp.tool()
def crash() -> str:
    """Kill the server mid-call."""
    sys.stdout.flush()
    os._exit(3)


@mcp.tool()
async def blurt(seconds: float) -> str:
    """Write a line that is not JSON-RPC to stdout (a stray print), then answer late."""
    os.write(_WIRE, b"this line is not JSON-RPC\n")
    await anyio.sleep(seconds)
    return "late"


@mcp.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name needs mapping."""
    return "dotted"


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@mcp.tool()
async def grow(ctx: Context) -> str:
    """Add the `shout` tool and tell the client, then wait until it lists the tools again."""
    mcp.add_tool(shout)
    ToyServer.listed = anyio.Event()
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    with anyio.move_on_after(10):
        await ToyServer.listed.wait()
    return "grown"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        import uvicorn

        config = uvicorn.Config(mcp.streamable_http_app(), fd=int(sys.argv[2]), log_level="error")
        anyio.run(uvicorn.Server(config).serve)
    else:
        mcp.run()
