"""Answering a suspended run's requests: automatically, at a prompt, or from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError

from actors import Answer, Request
from actors.cli._errors import CliError
from actors.cli._view import View

__all__ = ["approve_all", "ask_each", "describe_request", "leave_open", "parse_answer"]


def describe_request(request: Request) -> str:
    """One request in one line: ``id (kind) from agent: prompt``."""
    prompt = request.prompt or json.dumps(request.data)
    return f"{request.id} ({request.kind}) from {request.agent_id}: {prompt}"


def leave_open(_requests: Sequence[Request]) -> None:
    """Answer nothing: the run stays suspended (and stored) for a later resume."""
    return None


def approve_all(view: View) -> Callable[[Sequence[Request]], Mapping[str, Answer] | None]:
    """Approve every approval request; leave the run suspended on any other kind."""

    def decide(requests: Sequence[Request]) -> Mapping[str, Answer] | None:
        if any(r.kind != "approval" for r in requests):
            return None
        for request in requests:
            view.note(f"approved automatically: {describe_request(request)}")
        return {r.id: Answer(ok=True) for r in requests}

    return decide


def ask_each(
    view: View, ask: Callable[[str], str]
) -> Callable[[Sequence[Request]], Mapping[str, Answer] | None]:
    """Ask the user about each request: y/n for approvals (no by default), a line otherwise.

    Args:
        view: Paused while the user types.
        ask: Shows a prompt and returns the line typed (``input``); EOFError means no answer.
    """

    def decide(requests: Sequence[Request]) -> Mapping[str, Answer] | None:
        answers: dict[str, Answer] = {}
        with view.paused():
            for request in requests:
                try:
                    if request.kind == "approval":
                        line = ask(f"{describe_request(request)}\n  approve? [y/N] ")
                        ok = line.strip().lower() in ("y", "yes")
                        answers[request.id] = Answer(
                            ok=ok, reason=None if ok else "declined at the prompt"
                        )
                    else:
                        line = ask(f"{describe_request(request)}\n  answer: ")
                        answers[request.id] = Answer(ok=True, data=line)
                except EOFError:
                    answers[request.id] = Answer(ok=False, reason="no answer was given")
        for request in requests:
            verdict = "approved" if answers[request.id].ok else "declined"
            view.note(f"{verdict}: {describe_request(request)}")
        return answers

    return decide


def parse_answer(text: str) -> tuple[str, Answer]:
    """Read ``REQUEST_ID=JSON`` as given to ``--answer``.

    ``true``/``false`` approve or decline; an object is an `Answer` (``{"ok": false, "reason":
    "..."}``); any other JSON value is the data of an approving answer (``"Paris"``, ``42``).

    Raises:
        CliError: The text is not ``ID=JSON``, or the object is not an `Answer`.
    """
    request_id, sep, raw = text.partition("=")
    hint = "write --answer REQUEST_ID=true, =false, ='\"text\"' or ='{\"ok\": false, ...}'"
    if not sep or not request_id.strip():
        raise CliError(f"--answer {text!r} is not REQUEST_ID=JSON", hint, code=2)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--answer {request_id}: {raw!r} is not JSON ({exc.msg})", hint, code=2
        ) from None
    if isinstance(value, bool):
        return request_id.strip(), Answer(ok=value)
    if isinstance(value, dict):
        try:
            return request_id.strip(), Answer.model_validate(value)
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in problem["loc"])
            raise CliError(
                f"--answer {request_id}: not an answer ({where}: {problem['msg']})",
                'an answer object has "ok", "data", "reason" and "arguments"',
                code=2,
            ) from None
    return request_id.strip(), Answer(ok=True, data=value)
