"""The ``actors`` command: argument parsing, logging, and turning errors into one line + hint."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from actors import __version__
from actors._logging import configure_logging, current_sink, restore_sink
from actors._safe import exception_message
from actors.cli import _demo, _mcp, _run, _serve, _sessions, _simulate, _trace
from actors.cli._errors import CliError, hint_for, one_line
from actors.cli._home import store_flag
from actors.exceptions import ActorsError

__all__ = ["build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are one line plus a hint, like every other error."""

    def error(self, message: str) -> NoReturn:
        raise CliError(message, f"see '{self.prog} --help'", code=2)


def _common() -> argparse.ArgumentParser:
    """Options every command takes (also accepted before the command name)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a command's parser must not reset a value given before the command name.
    common.add_argument(
        "--db",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="the session database (default: $ACTORS_HOME/sessions.sqlite, ~/.actors/...)",
    )
    common.add_argument(
        "--store",
        metavar="DSN",
        default=argparse.SUPPRESS,
        help=(
            "a PostgreSQL session store instead of --db, e.g. postgresql://user@host/dbname "
            "(keep the password in PGPASSWORD or ~/.pgpass)"
        ),
    )
    common.add_argument(
        "--plain",
        action="store_true",
        default=argparse.SUPPRESS,
        help="plain lines instead of the live view (the default when stdout is not a terminal)",
    )
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks and debug logs",
    )
    common.add_argument(
        "--log-format",
        choices=("console", "json"),
        default=argparse.SUPPRESS,
        help="how the library's log lines on stderr look (default: console)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command."""
    common = _common()
    parser = _Parser(
        prog="actors",
        parents=[common],
        description=(
            "LLM agent trees in which every agent is an actor that owns its context. "
            "Sessions are stored in $ACTORS_HOME/sessions.sqlite (ACTORS_HOME defaults to "
            "~/.actors); --db overrides it, --store DSN uses a PostgreSQL database instead."
        ),
    )
    parser.add_argument("--version", action="version", version=f"actors {__version__}")
    commands = parser.add_subparsers(
        title="commands", metavar="COMMAND", required=True, parser_class=_Parser
    )
    _demo.add_parser(commands, common)
    _run.add_parser(commands, common)
    _sessions.add_parser(commands, common)
    _simulate.add_parser(commands, common)
    _trace.add_parser(commands, common)
    _mcp.add_parser(commands, common)
    _serve.add_parser(commands, common)
    return parser


def _report(message: str, hint: str) -> None:
    print(f"actors: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``actors`` command.

    Args:
        argv: The arguments, without the program name; ``sys.argv[1:]`` by default.

    Returns:
        The exit code: 0 on success, 1 on a failure, 2 on a usage mistake, 130 when
        interrupted.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments
    logging_before = current_sink()
    try:
        args = build_parser().parse_args(arguments)
        debug = bool(getattr(args, "debug", False))
        args.db = getattr(args, "db", None)
        args.store = getattr(args, "store", None)
        args.plain = bool(getattr(args, "plain", False))
        args.debug = debug
        args.db_flag = store_flag(args.db, args.store)
        # Warnings only, one line each; everything, with tracebacks, under --debug.
        configure_logging(
            "DEBUG" if debug else "WARNING",
            format=getattr(args, "log_format", "console"),
            tracebacks=debug,
        )
        return int(args.handler(args))
    except CliError as exc:
        if debug:
            traceback.print_exc()
        _report(exc.message, exc.hint)
        return exc.code
    except ActorsError as exc:
        if debug:
            traceback.print_exc()
        _report(one_line(exception_message(exc)) or type(exc).__name__, hint_for(exc))
        return 1
    except BrokenPipeError:  # `actors sessions show ID | head`: the reader has what it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        _report("interrupted", "")
        return 130
    except Exception as exc:  # the last line of defence: one line, the traceback on request
        if debug:
            traceback.print_exc()
        _report(
            f"unexpected {type(exc).__name__}: {one_line(exception_message(exc))}",
            "run again with --debug to see the traceback",
        )
        return 1
    finally:  # called from Python, the command leaves the caller's logging as it was
        restore_sink(logging_before)
