"""Type-checked (not run): the public API keeps its types end to end.

CI runs ``mypy --strict tests/typecheck``; a change that loses a type fails there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from actors import (
    Agent,
    ContextUpdate,
    LoggedEvent,
    RunContext,
    RunResult,
    Runtime,
    configure_logging,
    tool,
)
from actors.testing import ScriptedModel


@dataclass(frozen=True)
class Deps:
    """The tool context of this example."""

    user_id: int


class Weather(BaseModel):
    """A structured answer."""

    city: str
    celsius: float


@tool
def remember(ctx: RunContext[Deps], note: str) -> tuple[str, ContextUpdate]:
    """Remember a note for the user.

    Args:
        note: The note.
    """
    assert_type(ctx.tool_context.user_id, int)
    return "ok", ContextUpdate().append("notes", note)


agent: Agent[Weather] = Agent(
    "weather", model=ScriptedModel([]), output_type=Weather, tools=[remember]
)


def main() -> None:
    """Spawn, run, read typed output."""
    configure_logging("DEBUG", format="json", stream=sys.stderr, tracebacks=False)
    assert_type(LoggedEvent("app.note", {"n": 1}).type, str)
    with Runtime() as runtime:
        ref = runtime.spawn(agent, tool_context=Deps(user_id=1))
        result = ref.run("Weather in Paris?")
        assert_type(result, RunResult[Weather])
        if result.output is not None:
            assert_type(result.output.celsius, float)
