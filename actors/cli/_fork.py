"""``actors sessions log|fork|rewind``: a session's events by seq, and branching at one."""

from __future__ import annotations

import argparse
import json
from typing import Any

from actors import UserMessage
from actors.cli._errors import CliError
from actors.cli._home import open_store
from actors.cli._output import Output
from actors.context._parts import describe_content
from actors.host import make_rewind
from actors.store._fork import FORK_KEY
from actors.store._protocol import has_session

__all__ = ["add_fork_parsers"]


def add_fork_parsers(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``log``, ``fork`` and ``rewind`` to ``actors sessions``."""
    log = sub.add_parser(
        "log", parents=[parent], help="an agent's events with their seqs (the root's by default)"
    )
    log.add_argument("session_id", metavar="ID")
    log.add_argument("--agent", metavar="AGENT_ID", help="another agent of the session")
    log.set_defaults(handler=log_session)

    fork = sub.add_parser(
        "fork",
        parents=[parent],
        help="a new session: the tree as it was just after one of the root's events",
        description=(
            "Fork a session just after the root's event SEQ (see 'actors sessions log'). The "
            "new session shares the stored logs up to that point (nothing is copied) and is "
            "continued like any other: nothing before the cut runs again. The original is "
            "not changed."
        ),
    )
    fork.add_argument("session_id", metavar="ID")
    fork.add_argument("--at", type=int, required=True, metavar="SEQ", help="the root's event")
    fork.add_argument("--as", dest="new_id", metavar="NEW_ID", help="the new session's id")
    fork.set_defaults(handler=fork_session)

    rewind = sub.add_parser(
        "rewind",
        parents=[parent],
        help="take a session back to just after one of the root's events (asks first)",
        description=(
            "Rewind a session, under its own id, to just after the root's event SEQ. What "
            "came after is kept, readable, as the session ID-rewound-N."
        ),
    )
    rewind.add_argument("session_id", metavar="ID")
    rewind.add_argument("--at", type=int, required=True, metavar="SEQ", help="the root's event")
    rewind.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    rewind.set_defaults(handler=rewind_session)


def _summary(event: dict[str, Any]) -> str:
    data = event.get("data") or {}
    if "content" in data and isinstance(data["content"], str):
        text = data["content"]
    elif "content" in data and isinstance(data["content"], list):
        text = _parts_summary(data["content"])
    elif event["type"] == "tool_call" or "name" in data:
        text = f"{data.get('name', '')} {json.dumps(data.get('arguments', {}))}"
    elif "child_id" in data:
        text = str(data["child_id"])
    else:
        text = json.dumps(data, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:59] + "…"


def _parts_summary(content: list[Any]) -> str:
    """A logged message's parts as text, each binary part a placeholder (never its base64)."""
    try:
        return describe_content(UserMessage(content=content).content)
    except ValueError:  # not parts after all (an app's own event): its JSON
        return json.dumps(content, ensure_ascii=False)


def log_session(args: argparse.Namespace) -> int:
    """``actors sessions log ID``: one line per event, with its seq."""
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        stored = store.load(args.session_id, snapshots=True)  # the head; the log comes next
        agent_id = args.agent or stored.root_agent_id
        if all(a.record.agent_id != agent_id for a in stored.agents):
            raise CliError(
                f"session {args.session_id} has no agent {agent_id}",
                f"see its agents with 'actors sessions show {args.session_id}'",
            )
        origin = stored.data.get(FORK_KEY)
        if isinstance(origin, dict):
            out.line(f"forked from {origin.get('session')} at {origin.get('at')}")
        events = store.read_events(args.session_id, agent_id)
        rows: list[list[object]] = [
            [e["seq"], e["type"], str(e["created_at"])[:19].replace("T", " "), _summary(e)]
            for e in events
        ]
        out.table(["seq", "type", "created", "summary"], rows)
    return 0


def fork_session(args: argparse.Namespace) -> int:
    """``actors sessions fork ID --at SEQ``."""
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        new_id = args.new_id or _free_id(store, f"{args.session_id}-fork")
        if has_session(store, new_id):
            raise CliError(f"session {new_id} exists already", "pass another id with --as")
        store.fork(args.session_id, new_id, at=args.at, root_agent_id=new_id)
        out.line(f"forked {args.session_id} at {args.at}: session {new_id}")
        out.line(f"see it with 'actors sessions show {new_id}{args.db_flag}'")
    return 0


def _free_id(store: Any, stem: str) -> str:
    n = 1
    while has_session(store, f"{stem}-{n}"):
        n += 1
    return f"{stem}-{n}"


def rewind_session(args: argparse.Namespace) -> int:
    """``actors sessions rewind ID --at SEQ``: asks before it rewinds, unless ``--yes``."""
    out = Output.for_stdout(plain=args.plain)
    with open_store(args.db, create=False, store=args.store) as store:
        last = store.last_seq(args.session_id, store.load(args.session_id).root_agent_id)
        if not args.yes:
            try:
                answer = input(
                    f"rewind {args.session_id} to its event {args.at} of {last}? "
                    "what came after is kept as another session [y/N] "
                )
            except EOFError:  # no one to ask: no
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                out.line()
                out.line("not rewound")
                return 1
        kept, _ = make_rewind(store, args.session_id, args.at, None)
        out.line(f"rewound {args.session_id} to {args.at}; what came after is session {kept}")
    return 0
