"""An agent's instructions: the system-prompt overlay, evaluated before every model request.

`Agent(system_prompt=...)` is logged once, as the leading system message of a fresh context;
`Agent(instructions=...)` is not logged at all. It is worked out again for each model request
(from a string, or a function of the `RunContext`) and put on the context as its overlay, so a
restored session runs with the instructions of the code that restores it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeAlias

from actors.context._run_context import RunContext
from actors.exceptions import AgentDefinitionError

__all__ = ["Instructions", "InstructionsFunction", "instructions_function"]

InstructionsFunction: TypeAlias = Callable[[RunContext[Any]], "str | None"]
"""A function of the model request's `RunContext` returning the instructions (None: none)."""

Instructions: TypeAlias = str | InstructionsFunction | Callable[[], "str | None"]
"""What ``Agent(instructions=...)`` takes: a string, or a function of the `RunContext` (or of
nothing) returning a string or None."""


def instructions_function(agent: str, value: object) -> InstructionsFunction | None:
    """Check ``Agent.instructions``; return it as a function of the `RunContext`, if it is one.

    Raises:
        AgentDefinitionError: neither a string nor a function of one (or no) argument.
    """
    if value is None or isinstance(value, str):
        return None
    if not callable(value):
        raise AgentDefinitionError(
            f"agent {agent!r}: instructions must be a string or a function of the RunContext "
            f"returning one, got {type(value).__name__}"
        )
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin without a signature: try it with the context
        return value
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    required += [p for p in params if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    takes_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if len(required) > 1 or (required and required[0].kind == required[0].KEYWORD_ONLY):
        raise AgentDefinitionError(
            f"agent {agent!r}: an instructions function takes the RunContext (or nothing), "
            f"but {_name(value)} needs the arguments {[p.name for p in required]}"
        )
    if positional or takes_varargs:
        return value
    bare: Callable[[], str | None] = value

    def with_context(_ctx: RunContext[Any]) -> str | None:
        return bare()

    return with_context


def _name(value: object) -> str:
    return getattr(value, "__qualname__", None) or repr(value)
