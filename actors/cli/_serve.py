"""``actors serve MODULE:AGENT``: an agent behind an HTTP API and a chat page."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from actors.cli._errors import CliError
from actors.cli._home import open_store, where
from actors.cli._jsonarg import json_object
from actors.cli._target import load_agent

__all__ = ["add_parser"]

TOKEN_ENV = "ACTORS_SERVE_TOKEN"


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors serve`` to the command parser."""
    parser = commands.add_parser(
        "serve",
        parents=[parent],
        help="serve an agent over HTTP, with a chat page: actors serve MODULE:AGENT",
        description=(
            "Serve AGENT (an Agent spec, or a function returning one) from MODULE: a JSON API "
            "with server-sent events (see /openapi.json) and a chat page at /. Sessions live "
            "in the session store (--db, --store); an idle one leaves memory and wakes on the "
            "next request. Listens on 127.0.0.1 unless --host says otherwise; any other "
            "address needs a token (needs the extra: pip install 'actors[serve]')."
        ),
    )
    parser.add_argument("target", metavar="MODULE:AGENT", help="where the agent spec is")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        help=f"the bearer token clients must send (default: ${TOKEN_ENV}); required off loopback",
    )
    parser.add_argument(
        "--idle-after",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="put a session to sleep in the store after this long idle (default 60)",
    )
    parser.add_argument(
        "--tool-context",
        metavar="JSON",
        help="the static channel, a JSON object given to every tool (never sent to clients)",
    )
    parser.add_argument(
        "--max-body",
        type=int,
        default=1 << 20,
        metavar="BYTES",
        help="the largest request body (default 1 MiB)",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        default=20.0,
        metavar="PER_SECOND",
        help="requests per second per client, bursts of 5x (default 20; 0 for no limit)",
    )
    parser.add_argument(
        "--no-a2a",
        action="store_true",
        help="do not serve A2A (served at /a2a, its card at /.well-known/agent-card.json, "
        "when a2a-sdk is installed: pip install 'actors[a2a]')",
    )
    parser.set_defaults(handler=serve_agent)


def serve_agent(args: argparse.Namespace) -> int:
    """Run ``actors serve``; returns the exit code once interrupted."""
    try:
        from actors.serve import RateLimit, serve
        from actors.serve._a2a_door import a2a_installed
        from actors.serve._server import check_bind
    except ImportError as exc:
        raise CliError(str(exc), "pip install 'actors[serve]'") from None
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not 0 < args.port < 65536:
        raise CliError(f"--port {args.port} is not a port", "e.g. --port 8000", code=2)
    if args.idle_after < 0 or args.max_body < 1 or args.rate_limit < 0:
        raise CliError(
            "--idle-after, --max-body and --rate-limit take positive numbers",
            "e.g. --idle-after 60 --max-body 1048576 --rate-limit 20",
            code=2,
        )
    try:
        check_bind(args.host, token)
    except Exception as exc:
        raise CliError(
            str(exc), f"actors serve {args.target} --host {args.host} --token TOKEN", code=2
        ) from None
    spec = load_agent(args.target)
    tool_context = json_object(args.tool_context, "--tool-context")
    rate = RateLimit(args.rate_limit, max(1, int(args.rate_limit * 5))) if args.rate_limit else None
    store = open_store(args.db, create=True, store=args.store)
    with store:
        shown = f"[{args.host}]" if ":" in args.host else args.host
        a2a = not args.no_a2a and a2a_installed()
        print(
            f"actors: serving {spec.name!r} at http://{shown}:{args.port}/ "
            f"(sessions in {where(store)}){'; A2A at /a2a' if a2a else ''}"
            f"{'; clients need the token' if token else ''}",
            file=sys.stderr,
            flush=True,
        )
        serve(
            spec,
            store,
            host=args.host,
            port=args.port,
            token=token,
            tool_context=tool_context,
            idle_after=args.idle_after,
            max_body=args.max_body,
            rate_limit=rate,
            log_level="info",  # where it listens, and a line per request
            a2a=a2a,
        )
    return 0
