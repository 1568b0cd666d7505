"""``actors mcp serve MODULE:AGENT``: an agent tree as an MCP server (stdio, or HTTP)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from actors.cli._errors import CliError
from actors.cli._jsonarg import json_object
from actors.cli._target import load_agent

__all__ = ["add_parser"]


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors mcp serve`` to the command parser."""
    parser = commands.add_parser(
        "mcp",
        parents=[parent],
        help="serve an agent as an MCP server: actors mcp serve MODULE:AGENT",
        description="The Model Context Protocol (needs the extra: pip install 'actors[mcp]').",
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    serve = sub.add_parser(
        "serve",
        parents=[parent],
        help="serve an agent as an MCP server (stdio by default)",
        description=(
            "Serve AGENT (an Agent spec, or a function returning one) from MODULE as an MCP "
            "server with one tool that runs the agent's tree on a task and returns its "
            "answer. Questions the agent asks go to the client as MCP elicitation. Speaks "
            "MCP on stdin/stdout unless --http is given; logs go to stderr."
        ),
    )
    serve.add_argument("target", metavar="MODULE:AGENT", help="where the agent spec is")
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    serve.add_argument(
        "--tool-context",
        metavar="JSON",
        help="the static channel, a JSON object given to every tool (never sent to clients)",
    )
    serve.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="how long one call may run (default 600)",
    )
    serve.set_defaults(handler=serve_agent)


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--http {text!r} is not HOST:PORT", "e.g. --http 127.0.0.1:8000", code=2)
    return host.strip("[]"), int(port)


def serve_agent(args: argparse.Namespace) -> int:
    """Run ``actors mcp serve``; returns the exit code when the client goes away."""
    http = _address(args.http) if args.http else None
    if args.timeout <= 0:
        raise CliError("--timeout must be positive", "e.g. --timeout 300", code=2)
    try:
        from actors.mcp import serve
    except ImportError as exc:
        raise CliError(str(exc), "pip install 'actors[mcp]'") from None
    spec = load_agent(args.target)
    tool_context = json_object(args.tool_context, "--tool-context")
    where = f"http://{http[0]}:{http[1]}/mcp" if http else "stdio"
    print(f"actors: serving {spec.name!r} over MCP ({where})", file=sys.stderr, flush=True)
    serve(spec, http=http, tool_context=tool_context, timeout=args.timeout)
    return 0
