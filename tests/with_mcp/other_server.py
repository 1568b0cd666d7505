"""A second real MCP server for the tests, whose tool names clash with the toy server's.

With the argument ``twins`` it also offers two tools whose names map to one.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("other")


@mcp.tool(name="dotted_name")
def dotted() -> str:
    """Offered as `dotted_name`, like the toy server's `dotted.name`."""
    return "other dotted"


def twin_dotted() -> str:
    """With `twin_tool`, two tools of one server that map to one name."""
    return "twin dotted"


def twin_plain() -> str:
    """See `twin.tool`."""
    return "twin plain"


if __name__ == "__main__":
    if sys.argv[1:] == ["twins"]:
        mcp.add_tool(twin_dotted, name="twin.tool")
        mcp.add_tool(twin_plain, name="twin_tool")
    mcp.run()
