"""``actors demo``: a research team of five agents, offline, in a live tree."""

from __future__ import annotations

import argparse
import time
from typing import Any

from actors import Agent, AgentRef, Runtime
from actors.cli._answers import approve_all, ask_each, leave_open
from actors.cli._demo_team import DEMO_QUESTION, DemoContext, build_team
from actors.cli._drive import Decide, drive
from actors.cli._errors import run_failed
from actors.cli._home import open_store, where
from actors.cli._output import Output
from actors.cli._session import (
    SessionKind,
    new_session_id,
    print_metadata,
    print_outcome,
    print_usage,
)
from actors.cli._trace import add_option, check_target, tracing
from actors.cli._view import LiveView, PlainView, View
from actors.exceptions import RunError
from actors.models import infer_model

__all__ = ["add_parser", "demo_spec"]


def demo_spec(kind: SessionKind) -> tuple[Agent[Any], DemoContext]:
    """The demo's root spec and tool context for a session the demo started."""
    model = infer_model(kind.model) if kind.model else None
    return build_team(model, pace=kind.pace), DemoContext(pace=kind.pace)


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors demo`` to the command parser."""
    parser = commands.add_parser(
        "demo",
        parents=[parent],
        help="run a research team of five agents offline, in a live tree",
        description=(
            "A lead agent plans and fans out to three researcher subagents in parallel (one "
            "of whose tools needs approval), then hands their findings to a writer. Runs "
            "offline on scripted models unless --model names a real one. The session is "
            "stored in the session database."
        ),
    )
    parser.add_argument(
        "question", nargs="?", default=DEMO_QUESTION, help="the question (used by real models)"
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--interactive",
        action="store_true",
        help="ask before approving the benchmark tool (by default it is approved)",
    )
    how.add_argument(
        "--defer",
        action="store_true",
        help="leave the approval open and exit; answer it with 'actors sessions resume'",
    )
    parser.add_argument(
        "--model",
        metavar="MODEL",
        help="run every agent on this model, e.g. openai:gpt-4o-mini (default: scripted)",
    )
    parser.add_argument(
        "--pace",
        type=float,
        default=1.0,
        help=argparse.SUPPRESS,  # speed of the simulated work; 0 for tests
    )
    add_option(parser)
    parser.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit code."""
    kind = SessionKind("demo", model=args.model, pace=max(args.pace, 0.0))
    trace_to = check_target(args.trace, "--trace")
    team, tool_context = demo_spec(kind)
    out = Output.for_stdout(plain=args.plain)
    store = open_store(args.db, create=True, store=args.store)
    started = time.perf_counter()
    with store, Runtime() as runtime:
        session_id = new_session_id()
        store.create_session(session_id, root_agent_id=team.name, data=kind.to_data(team.name))
        ref: AgentRef[Any] = runtime.spawn(
            team, store=store, session_id=session_id, tool_context=tool_context
        )
        with tracing(trace_to, store, session_id, out.line):
            _follow_demo(args, ref, out, session_id)
            out.heading("usage per agent")
            print_usage(out, store, session_id)
            out.heading("metadata each agent wrote (ContextUpdate)")
            print_metadata(out, store, session_id)
            out.line()
            out.line(f"session: {session_id}  (stored in {where(store)})")
    out.line(f"done in {time.perf_counter() - started:.1f} s", style="dim")
    return 0


def _follow_demo(
    args: argparse.Namespace, ref: AgentRef[Any], out: Output, session_id: str
) -> None:
    """Run the demo's question in the live view and print how it ended."""
    view: View
    if out.console is not None:
        view = LiveView(out.console, title=f"question: {args.question}")
    else:
        out.line(f"question: {args.question}")
        view = PlainView()
    with view:
        decide: Decide
        if args.interactive:
            decide = ask_each(view, input)
        elif args.defer:
            decide = leave_open
        else:
            decide = approve_all(view)
        try:
            result = drive(ref, lambda: ref.run(args.question, timeout=600), view, decide)
        except RunError as exc:
            raise run_failed(exc, session_id, args.db_flag) from exc
    print_outcome(out, result, session_id=session_id, db_flag=args.db_flag)
