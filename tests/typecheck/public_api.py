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
    Message,
    ModelSettings,
    RunContext,
    RunResult,
    Runtime,
    Subagent,
    configure_logging,
    keep_last_turns,
    tool,
)
from actors.exceptions import ModelRetry
from actors.models import FallbackModel
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


@tool(sequential=True)
def count(ctx: RunContext[Deps]) -> ContextUpdate:
    """Count one, after the previous call of this step."""
    return ContextUpdate().increment("count", by=ctx.metadata.get("step", 1))


def instructions(ctx: RunContext[Deps]) -> str:
    """The overlay, worked out for every model request."""
    return f"The user is {ctx.tool_context.user_id}."


def narrow(deps: Deps) -> Deps:
    """What a child gets of its parent's tool context."""
    return Deps(user_id=deps.user_id)


def warm_enough(ctx: RunContext[Deps], output: Weather) -> Weather:
    """An output validator: typed like a tool's context."""
    if output.celsius < -90:
        raise ModelRetry("Colder than anywhere on Earth; check again.")
    return output


def recent(ctx: RunContext[Deps], messages: list[Message]) -> list[Message]:
    """A history processor."""
    return messages[-10:]


helper = Agent("helper", model=ScriptedModel([]))
agent: Agent[Weather] = Agent(
    "weather",
    model=FallbackModel(ScriptedModel([]), "openai:gpt-4o-mini"),
    system_prompt="You report the weather.",
    instructions=instructions,
    output_type=Weather,
    tools=[remember, count],
    subagents=[Subagent(helper, tool_context=narrow)],
    output_validators=[warm_enough],
    history_processors=[keep_last_turns(3), recent],
    model_settings=ModelSettings(native_output=True),
)


def main() -> None:
    """Spawn, run, read typed output."""
    configure_logging("DEBUG", format="json", stream=sys.stderr, tracebacks=False)
    assert_type(LoggedEvent("app.note", {"n": 1}).type, str)
    with Runtime(default_model="test") as runtime:
        ref = runtime.spawn(agent, tool_context=Deps(user_id=1))
        result = ref.run("Weather in Paris?")
        assert_type(result, RunResult[Weather])
        if result.output is not None:
            assert_type(result.output.celsius, float)


def on_ray() -> None:
    """The same program on Ray: the same refs, the same types."""
    from actors import Subagent
    from actors.ray import RayRuntime

    lead: Agent[str] = Agent("lead", subagents=[Subagent(agent, placement="spread")])
    with RayRuntime(hosts=2) as runtime:
        ref = runtime.spawn(agent, tool_context=Deps(user_id=1))
        assert_type(ref.run("Weather in Paris?"), RunResult[Weather])
        assert_type(runtime.spawn(lead).run("go"), RunResult[str])


def hosts_share_one_face(path: str) -> None:
    """Runtime, Simulation and RayRuntime are HostFaces; the two with stores SessionHosts."""
    from actors import HostFace, SessionHost
    from actors.ray import RayRuntime
    from actors.sim import Simulation

    faces: list[HostFace] = [Runtime(), Simulation(), RayRuntime()]
    sessions: list[SessionHost] = [Runtime(), RayRuntime()]
    spec = Agent("a", output_type=int)
    for face in faces:
        assert_type(face.spawn(spec).run("go").output, int | None)
    for host in sessions:
        host.open_session(spec, session_id="s", store=path)
