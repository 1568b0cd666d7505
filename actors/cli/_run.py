"""``actors run MODULE:AGENT "prompt"``: run a user's agent, stored as a session."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from actors import AgentRef, Runtime
from actors.cli._answers import ask_each, leave_open
from actors.cli._drive import Decide, drive
from actors.cli._errors import CliError, run_failed
from actors.cli._home import open_store
from actors.cli._jsonarg import json_object
from actors.cli._output import Output
from actors.cli._session import (
    SessionKind,
    new_session_id,
    print_outcome,
    render_output,
    team_specs,
)
from actors.cli._target import load_agent, normalize_target
from actors.cli._trace import add_option, check_target, tracing
from actors.cli._view import LiveView, QuietView, View
from actors.exceptions import RunError, SessionNotFoundError
from actors.store import StoredSession

__all__ = ["add_parser"]


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors run`` to the command parser."""
    parser = commands.add_parser(
        "run",
        parents=[parent],
        help="run an agent defined in a module: actors run MODULE:AGENT 'prompt'",
        description=(
            "Import AGENT (an Agent spec, or a function returning one) from MODULE (a module "
            "importable from the current folder, or a file path), run it on the prompt, and "
            "store the session. The answer goes to stdout; progress and the session id to "
            "stderr."
        ),
    )
    parser.add_argument("target", metavar="MODULE:AGENT", help="where the agent spec is")
    parser.add_argument("prompt", help="the user's message")
    parser.add_argument(
        "--tool-context",
        metavar="JSON",
        help="the static channel, a JSON object given to every tool (never stored)",
    )
    parser.add_argument(
        "--metadata", metavar="JSON", help="the root agent's initial metadata, a JSON object"
    )
    parser.add_argument(
        "--session",
        metavar="ID",
        help="continue this stored session (or start a new one with this id)",
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="answer approvals and questions at the prompt (by default they stay open)",
    )
    parser.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="cancel the run after this long"
    )
    add_option(parser)
    parser.set_defaults(handler=run_agent)


def _existing(store: Any, session_id: str | None) -> StoredSession | None:
    if session_id is None:
        return None
    try:
        stored: StoredSession = store.load(session_id)
    except SessionNotFoundError:
        return None
    return stored


def run_agent(args: argparse.Namespace) -> int:
    """Run ``actors run``; returns the exit code."""
    target = normalize_target(args.target)
    spec = load_agent(target)
    tool_context = json_object(args.tool_context, "--tool-context")
    metadata = json_object(args.metadata, "--metadata")
    trace_to = check_target(args.trace, "--trace")
    out = Output.for_stdout(plain=args.plain)
    store = open_store(args.db, create=True, store=args.store)
    with store, Runtime() as runtime:
        stored = _existing(store, args.session)
        ref: AgentRef[Any]
        if stored is not None:
            if not stored.agents:
                raise CliError(
                    f"session {stored.session_id} holds no agent yet",
                    "start a new session (leave out --session, or give a new id)",
                )
            root = stored.agent(stored.root_agent_id).record
            if root.name != spec.name:
                raise CliError(
                    f"session {stored.session_id} belongs to agent {root.name!r}, "
                    f"not {spec.name!r}",
                    "continue it with the same MODULE:AGENT, or start a new session",
                    code=2,
                )
            if root.status == "suspended":
                raise CliError(
                    f"session {stored.session_id} waits for answers to open requests",
                    f"see them with 'actors sessions show {stored.session_id}{args.db_flag}'",
                )
            if metadata is not None:
                raise CliError(
                    "--metadata only sets up a new session",
                    "drop --metadata to continue the session",
                    code=2,
                )
            ref = runtime.restore(
                stored.session_id,
                store=store,
                agents=team_specs(spec),
                tool_context=tool_context,
            )
            session_id = stored.session_id
        else:
            session_id = args.session or new_session_id()
            kind = SessionKind("run", target=target)
            store.create_session(session_id, root_agent_id=spec.name, data=kind.to_data(spec.name))
            ref = runtime.spawn(
                spec,
                store=store,
                session_id=session_id,
                tool_context=tool_context,
                metadata=metadata,
                agent_id=spec.name,
            )
        with tracing(trace_to, store, session_id, _to_stderr):
            view: View = LiveView(out.console) if out.console is not None else QuietView(sys.stderr)
            with view:
                decide: Decide = ask_each(view, input) if args.interactive else leave_open
                try:
                    result = drive(
                        ref, lambda: ref.run(args.prompt, timeout=args.timeout), view, decide
                    )
                except RunError as exc:
                    raise run_failed(exc, session_id, args.db_flag) from exc
            if result.status == "completed" and not out.rich:
                print(render_output(result.output), flush=True)
            else:
                print_outcome(out, result, session_id=session_id, db_flag=args.db_flag)
            print(f"session: {session_id}", file=sys.stderr, flush=True)
    return 0


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
