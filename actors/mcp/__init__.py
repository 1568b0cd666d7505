"""MCP both ways: tools from MCP servers for agents, and agents served as MCP servers.

Needs the official MCP SDK: ``pip install 'actors[mcp]'``. Importing ``actors`` never imports
it; importing ``actors.mcp`` without it raises an `ImportError` naming the extra.

- `MCPServerStdio` (a command) and `MCPServerHTTP` (a streamable HTTP URL) are toolsets:
  ``Agent(toolsets=[MCPServerStdio("python", ["server.py"])])``. A runtime opens each server
  once, when an agent using it is spawned, shares the connection with every agent of the tree
  that uses it, and closes it at shutdown.
- `mcp_server` builds an MCP server (the SDK's ``MCPServer``) with one tool that runs an agent
  tree on a task; `serve` runs it over stdio or streamable HTTP. The command line:
  ``actors mcp serve MODULE:AGENT``.
"""

from actors.mcp._require import require_mcp

require_mcp()

from actors.mcp._serve import mcp_server, serve  # noqa: E402 (after the SDK check)
from actors.mcp._servers import MCPServerHTTP, MCPServerStdio  # noqa: E402

__all__ = ["MCPServerHTTP", "MCPServerStdio", "mcp_server", "serve"]
