"""``actors trace ID``, and ``--trace PATH`` of ``demo`` and ``run``: the trace viewer page."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from actors._files import write_whole
from actors.cli._errors import CliError, one_line
from actors.cli._home import open_store
from actors.store import SessionStore
from actors.trace import render_trace
from actors.trace._render import branches_of

__all__ = ["add_option", "add_parser", "check_target", "tracing"]


def add_parser(commands: Any, parent: argparse.ArgumentParser) -> None:
    """Add ``actors trace`` to the command parser."""
    parser = commands.add_parser(
        "trace",
        parents=[parent],
        help="write a session's timeline as one HTML file (opens offline in a browser)",
        description=(
            "Write a stored session's agent tree as a timeline: one lane per agent, bars for "
            "turns, model requests, tool and subagent calls, markers for suspensions, resumes, "
            "steering, cancellations, errors and recoveries; click one to see its events. The "
            "file is self-contained: it needs no network and opens from file://."
        ),
    )
    parser.add_argument("session_id", metavar="ID", help="the session (see 'actors sessions list')")
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="the HTML file to write (default: trace-ID.html here; '-' for stdout)",
    )
    parser.set_defaults(handler=trace_session)


def add_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--trace PATH`` to a command that runs a tree."""
    parser.add_argument(
        "--trace",
        metavar="PATH",
        help="when the run ends, write the session's timeline to this HTML file",
    )


def check_target(path: str | None, flag: str) -> Path | None:
    """The file to write a trace to, checked before anything runs.

    Raises:
        CliError: Its folder does not exist, or it names a folder.
    """
    if path is None:
        return None
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliError(f"{flag} {path} is a folder", f"name a file, e.g. {flag} trace.html", code=2)
    if not target.parent.is_dir():
        raise CliError(
            f"no folder {target.parent} for {flag} {path}",
            "create the folder first, or write the trace somewhere else",
            code=2,
        )
    return target


def _write(store: SessionStore, session_id: str, target: Path) -> Path:
    page = render_trace(store.load(session_id), branches=branches_of(store, session_id))
    try:
        write_whole(target, page)
    except OSError as exc:
        raise CliError(
            f"cannot write {target}: {exc.strerror or exc}",
            "pass another path with -o PATH (or --trace PATH)",
        ) from exc
    return target


def trace_session(args: argparse.Namespace) -> int:
    """``actors trace ID``."""
    with open_store(args.db, create=False, store=args.store) as store:
        if args.output == "-":
            branches = branches_of(store, args.session_id)
            sys.stdout.write(render_trace(store.load(args.session_id), branches=branches))
            sys.stdout.flush()
            return 0
        safe = re.sub(r"[^\w.-]", "_", args.session_id)  # a session id may hold a slash
        default = Path(f"trace-{safe}.html")
        target = check_target(args.output, "-o") or default
        written = _write(store, args.session_id, target)
    print(f"trace: {written}  (open {written.resolve().as_uri()} in a browser)")
    return 0


@contextmanager
def tracing(
    target: Path | None,
    store: SessionStore,
    session_id: str,
    report: Callable[[str], None],
) -> Iterator[None]:
    """Write the session's trace when the block ends, however it ends.

    A trace matters most for a run that failed or was interrupted, so it is written then too;
    a trace that cannot be written then is reported, and the run's own error goes on.

    Raises:
        CliError: The block succeeded but the trace could not be written.
    """
    if target is None:
        yield
        return
    try:
        yield
    except BaseException:
        try:
            written = _write(store, session_id, target)
        except Exception as exc:  # the run's error is the one to report
            report(f"trace not written: {one_line(str(exc))}")
        else:
            report(f"trace: {written}")
        raise
    report(f"trace: {_write(store, session_id, target)}")
