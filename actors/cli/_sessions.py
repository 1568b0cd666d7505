"""``actors sessions list|show|resume|export``: the sessions in the session database.

``log``, ``fork`` and ``rewind`` are in `actors.cli._fork`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from actors import (
    AgentContext,
    AgentRef,
    AssistantMessage,
    Event,
    Message,
    Runtime,
    SystemMessage,
    ToolResultMessage,
    TreeNode,
    UserMessage,
)
from actors.cli._answers import ask_each, leave_open, parse_answer
from actors.cli._drive import Decide, drive
from actors.cli._errors import CliError, one_line, run_failed
from actors.cli._fork import add_fork_parsers
from actors.cli._home import open_store, where
from actors.cli._jsonarg import json_object
from actors.cli._output import Output
from actors.cli._session import (
    SessionKind,
    print_outcome,
    print_usage,
    team_specs,
)
from actors.cli._view import LiveView, PlainView, View, describe, render_tree
from actors.context._parts import describe_content
from actors.exceptions import RunError, UnknownRequestError
from actors.store import SessionStore, StoredSession

__all__ = ["add_parser"]


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors sessions ...`` to the command parser."""
    parser = commands.add_parser(
        "sessions",
        parents=[parent],
        help="list, show, resume, export, fork and rewind stored sessions",
        description="The sessions stored in the session database.",
    )
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    listing = sub.add_parser("list", parents=[parent], help="every session, newest first")
    listing.set_defaults(handler=list_sessions)

    show = sub.add_parser(
        "show", parents=[parent], help="a session's tree, open requests and transcripts"
    )
    show.add_argument("session_id", metavar="ID")
    show.add_argument(
        "--full", action="store_true", help="print long messages whole (default: shortened)"
    )
    show.set_defaults(handler=show_session)

    resume = sub.add_parser(
        "resume",
        parents=[parent],
        help="answer a suspended session's requests and continue it",
        description=(
            "Restore a suspended session, answer its open requests, and run on until it "
            "completes or suspends again. An answer is REQUEST_ID=JSON: true or false to "
            'approve or decline, an object such as {"ok": false, "reason": "..."}, or any '
            "other JSON value as the data of an approving answer."
        ),
    )
    resume.add_argument("session_id", metavar="ID")
    resume.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="REQUEST_ID=JSON",
        help="an answer to an open request (repeat for several)",
    )
    resume.add_argument(
        "--tool-context",
        metavar="JSON",
        help="the static channel again (it is never stored), a JSON object",
    )
    resume.add_argument(
        "--interactive", action="store_true", help="answer further requests at the prompt"
    )
    resume.set_defaults(handler=resume_session)

    export = sub.add_parser(
        "export", parents=[parent], help="a session's event log as JSON lines on stdout"
    )
    export.add_argument("session_id", metavar="ID")
    export.set_defaults(handler=export_session)
    add_fork_parsers(sub, parent)


def _when(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def list_sessions(args: argparse.Namespace) -> int:
    """``actors sessions list``."""
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        sessions = store.list_sessions()
        if not sessions:
            out.line(f"no sessions in {where(store)}")
            return 0
        rows: list[list[object]] = [
            [
                s.session_id,
                s.root_agent_id,
                s.agent_count,
                s.event_count,
                _when(s.created_at),
                _when(s.updated_at),
            ]
            for s in sessions
        ]
        out.table(["session", "root", "agents", "events", "created", "updated"], rows)
    return 0


def _tree(stored: StoredSession, contexts: dict[str, AgentContext]) -> TreeNode:
    records = {a.record.agent_id: a.record for a in stored.agents}

    def node(agent_id: str) -> TreeNode:
        record = records[agent_id]
        children = tuple(
            node(r.agent_id) for r in records.values() if r.parent_id == record.agent_id
        )
        step = contexts[agent_id].iteration
        return TreeNode(
            agent_id, record.name, record.parent_id, record.status, step, None, children
        )

    return node(stored.root_agent_id)


def _indented(node: TreeNode, depth: int = 0) -> list[tuple[int, TreeNode]]:
    """The tree depth first, each node with its depth."""
    out = [(depth, node)]
    for child in node.children:
        out.extend(_indented(child, depth + 1))
    return out


def _short(text: str, full: bool) -> str:
    text = text.strip()
    if full or len(text) <= 300:
        return text
    return text[:299] + "…"


def _transcript_lines(ctx: AgentContext, full: bool) -> list[str]:
    """The transcript, a message per entry; lines after a message's first are indented.

    A summary that a compaction put in place of older messages is preceded by a note of what
    it shadows, and (with ``full``) by those messages themselves: the log keeps them.
    """
    lines: list[str] = []
    events = ctx.events
    for message, _, seq in ctx.entries:
        event = events[seq]
        if event.type == "compacted":
            lines.extend(_shadowed_lines(events, event, full))
        lines.extend(_message_lines(message, full))
    return [line.replace("\n", "\n    ") for line in lines]


def _message_lines(message: Message, full: bool) -> list[str]:
    if isinstance(message, SystemMessage):
        return [f"system: {_short(str(message.content), full)}"]
    if isinstance(message, UserMessage):
        # Parts as placeholders ("[image image/png, 51.2 kB]"): never base64 on a terminal.
        return [f"user: {_short(describe_content(message.content), full)}"]
    if isinstance(message, AssistantMessage):
        lines = [f"assistant: {_short(str(message.content), full)}"] if message.content else []
        for call in message.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            lines.append(f"assistant → {call.name}({_short(arguments, full)})  [{call.id}]")
        return lines
    assert isinstance(message, ToolResultMessage)
    flag = " (error)" if message.is_error else ""
    return [f"tool {message.tool_name}{flag}: {_short(describe_content(message.content), full)}"]


def _shadowed_lines(events: Sequence[Event], event: Event, full: bool) -> list[str]:
    """The note before a compaction's summary, and with ``full`` the messages it shadows."""
    data = event.data
    first, last, kept = data["first"], data["last"], set(data.get("kept") or ())
    before = AgentContext.from_events(events[: event.seq]).messages
    shadowed = [before[n] for n in range(first, last + 1) if n not in kept]
    how = "trimmed" if data.get("fallback") == "trim" else f"summarised by {data.get('summarizer')}"
    note = f"[compacted at event {event.seq}: {len(shadowed)} earlier messages {how}"
    if not full:
        return [note + "; --full shows them]"]
    return [note + ":]", *("  | " + line for m in shadowed for line in _message_lines(m, full))]


def open_requests(stored: StoredSession) -> list[tuple[str, str, dict[str, Any]]]:
    """The open requests of a stored session: (agent id, request id, suspended-event data)."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    for agent in stored.agents:
        ctx = AgentContext.deserialize(agent.context)
        for request_id, data in ctx.suspended.items():
            out.append((agent.record.agent_id, request_id, data))
    return out


def _request_line(agent_id: str, request_id: str, data: dict[str, Any]) -> str:
    request = data.get("request", {}) if isinstance(data.get("request"), dict) else {}
    kind = request.get("kind", "?")
    prompt = request.get("prompt") or json.dumps(request.get("data"))
    return f"{request_id} ({kind}) from {agent_id}: {prompt}"


def _load(store: SessionStore, session_id: str) -> StoredSession:
    return store.load(session_id)


def show_session(args: argparse.Namespace) -> int:
    """``actors sessions show ID``."""
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        stored = _load(store, args.session_id)
        contexts = {a.record.agent_id: AgentContext.deserialize(a.context) for a in stored.agents}
        out.line(f"session {stored.session_id}", style="bold")
        out.line(f"created {_when(stored.created_at)}, updated {_when(stored.updated_at)}")
        if stored.root_agent_id not in contexts:
            out.line("(the session holds no agent yet)")
            return 0
        out.heading("tree")
        tree = _tree(stored, contexts)
        if out.console is not None:
            out.console.print(render_tree(tree))
        else:
            for depth, node in _indented(tree):
                out.line(f"{'  ' * depth}{describe(node)}")
        requests = open_requests(stored)
        if requests:
            out.heading("open requests")
            for agent_id, request_id, data in requests:
                out.line(_request_line(agent_id, request_id, data))
            answers = " ".join(f"--answer {rid}=true" for _, rid, _ in requests)
            out.line(
                f"answer with: actors sessions resume {stored.session_id} {answers}{args.db_flag}"
            )
        for agent in stored.agents:
            record = agent.record
            out.heading(f"{record.agent_id} ({record.name}) · {record.status}")
            for line in _transcript_lines(contexts[record.agent_id], args.full):
                out.line(line)
        out.heading("usage per agent")
        print_usage(out, store, stored.session_id)
    return 0


def _spec_for(stored: StoredSession, args: argparse.Namespace) -> tuple[Any, Any]:
    """The root spec and tool context to restore a session the command started."""
    kind = SessionKind.from_data(stored.data)
    if kind is None:
        raise CliError(
            f"session {stored.session_id} was not started by the actors command, so it does "
            "not know the agent's spec",
            "restore it from Python: Runtime().restore(session_id, store=..., agents=[...])",
        )
    tool_context = json_object(args.tool_context, "--tool-context")
    if kind.kind == "demo":
        from actors.cli._demo import demo_spec

        spec, demo_context = demo_spec(kind)
        return spec, tool_context if tool_context is not None else demo_context
    from actors.cli._target import load_agent

    assert kind.target is not None
    return load_agent(kind.target), tool_context


def resume_session(args: argparse.Namespace) -> int:
    """``actors sessions resume ID --answer REQUEST_ID=JSON``."""
    answers = dict(parse_answer(text) for text in args.answer)
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        stored = _load(store, args.session_id)
        pending = open_requests(stored)
        if not pending:
            kind = SessionKind.from_data(stored.data)
            target = kind.target if kind is not None and kind.kind != "demo" else None
            hint = (
                f"continue it with 'actors run {target} \"prompt\" --session {stored.session_id}'"
                if target
                else f"see what it holds with 'actors sessions show {stored.session_id}'"
            )
            raise CliError(f"session {stored.session_id} has no open requests", hint)
        if not answers:
            ids = ", ".join(rid for _, rid, _ in pending)
            raise CliError(
                f"no --answer given; open requests: {ids}",
                f"answer each with --answer REQUEST_ID=true (see 'actors sessions show "
                f"{stored.session_id}')",
                code=2,
            )
        spec, tool_context = _spec_for(stored, args)
        with Runtime() as runtime:
            ref: AgentRef[Any] = runtime.restore(
                stored.session_id, store=store, agents=team_specs(spec), tool_context=tool_context
            )
            view: View = LiveView(out.console) if out.console is not None else PlainView()
            with view:
                for request_id in answers:
                    view.note(f"answered: {request_id}")
                decide: Decide = ask_each(view, input) if args.interactive else leave_open
                try:
                    result = drive(ref, lambda: ref.resume(answers), view, decide)
                except UnknownRequestError as exc:
                    raise CliError(
                        one_line(str(exc)),
                        f"see the open requests with 'actors sessions show {stored.session_id}"
                        f"{args.db_flag}'",
                    ) from exc
                except RunError as exc:
                    raise run_failed(exc, stored.session_id, args.db_flag) from exc
            print_outcome(out, result, session_id=stored.session_id, db_flag=args.db_flag)
            out.heading("usage per agent")
            print_usage(out, store, stored.session_id)
            out.line()
            out.line(f"session: {stored.session_id}  (stored in {where(store)})")
    return 0


def export_session(args: argparse.Namespace) -> int:
    """``actors sessions export ID``: one JSON object per event, agent by agent, in order.

    A part's content is written inline (its base64 ``data``), as the store gives it back: the
    file stands alone, with no reference into the store's blobs.
    """
    with open_store(args.db, create=False, store=args.store) as store:
        stored = _load(store, args.session_id)
        for agent in stored.agents:
            for event in agent.context.get("events", []):
                line = {
                    "session_id": stored.session_id,
                    "agent_id": agent.record.agent_id,
                    "parent_id": agent.record.parent_id,
                    **event,
                }
                sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0
