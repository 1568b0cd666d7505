"""Driving a run to its end: show the tree while it runs, answer requests, resume, repeat."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actors import AgentRef, Answer, Request, RunResult
from actors._safe import exception_text
from actors.cli._errors import CliError
from actors.cli._view import View

__all__ = ["Decide", "drive"]

Decide = Callable[[Sequence[Request]], Mapping[str, Answer] | None]
"""Answers for the open requests of a suspended run, or None to leave the run suspended."""

REFRESH = 1 / 12  # seconds between two looks at the tree while a run is in flight
CANCEL_WAIT = 15.0


def _follow(
    job: concurrent.futures.Future[RunResult[Any]], ref: AgentRef[Any], view: View
) -> RunResult[Any]:
    """Wait for ``job``, redrawing the tree between bounded waits; Ctrl-C cancels the tree."""
    try:
        while True:
            try:
                result = job.result(timeout=REFRESH)
            except concurrent.futures.TimeoutError:
                view.update(ref.tree())
                continue
            view.update(ref.tree())
            return result
    except KeyboardInterrupt:
        view.note("interrupted: cancelling the tree ...")
        ref.cancel("interrupted by the user")
        try:
            job.result(timeout=CANCEL_WAIT)
        except Exception as exc:  # the run ends as it may: the user asked it to stop
            view.note(f"the run ended with {exception_text(exc)}")
        raise CliError("interrupted", "the session keeps what was done so far", code=130) from None


def drive(
    ref: AgentRef[Any],
    start: Callable[[], RunResult[Any]],
    view: View,
    decide: Decide,
) -> RunResult[Any]:
    """Run ``start`` (a blocking run or resume of ``ref``) and see it through.

    While the run is in flight the view is redrawn; when it suspends, ``decide`` answers its
    requests and the run resumes, until it completes, is cancelled, or ``decide`` returns None.

    Raises:
        CliError: The user interrupted the run (Ctrl-C).
        RunError: The run failed.
    """
    # A worker thread does the blocking call so this thread stays free to draw and to take
    # Ctrl-C; the run itself lives in the agent actors either way.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="actors-cli") as pool:
        result = _follow(pool.submit(start), ref, view)
        while result.suspended:
            answers = decide(result.requests)
            if answers is None:
                return result
            result = _follow(pool.submit(ref.resume, answers), ref, view)
        return result
