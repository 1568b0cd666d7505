"""Instructions are an overlay worked out for every model request; the system prompt is logged."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from actors import (
    Agent,
    AgentContext,
    ContextUpdate,
    RunContext,
    Runtime,
    SystemMessage,
    UserMessage,
    tool,
)
from actors.exceptions import AgentDefinitionError, RunFailedError
from actors.store import MemoryStore
from actors.testing import FakeClock, FunctionModel, ScriptedModel, SyncDriver, call

from .helpers import types


def system_of(model: ScriptedModel | FunctionModel, request: int = 0) -> str | None:
    """The system message the model got in its ``request``-th request, or None."""
    first = model.requests[request].messages[0]
    return first.content if isinstance(first, SystemMessage) else None


def logged_system(ctx: AgentContext) -> list[str]:
    return [m.content for m in ctx.messages if isinstance(m, SystemMessage)]


def test_instructions_reach_the_model_and_are_never_logged(rt: Runtime) -> None:
    model = ScriptedModel(["hi", "again"])
    ref = rt.spawn(Agent("a", model=model, instructions="Be brief."))
    first = ref.run("hello")
    ref.run("hello again")
    assert system_of(model, 0) == system_of(model, 1) == "Be brief."
    assert "system_message" not in types(ref.context().events)
    assert "Be brief." not in str(ref.context().serialize())
    assert [m.role for m in first.messages] == ["user", "assistant"]


def test_the_system_prompt_is_logged_once_and_the_instructions_appended(rt: Runtime) -> None:
    model = ScriptedModel(["hi", "again"])
    agent = Agent("a", model=model, system_prompt="You help Ada.", instructions="Be brief.")
    ref = rt.spawn(agent)
    ref.run("hello")
    ref.run("hello again")
    assert system_of(model, 0) == system_of(model, 1) == "You help Ada.\n\nBe brief."
    assert logged_system(ref.context()) == ["You help Ada."]  # logged once, at the start
    assert ref.context().system_prompt == "You help Ada."


def test_an_instructions_function_is_evaluated_for_every_request(rt: Runtime) -> None:
    seen: list[RunContext[Any]] = []

    def instructions(ctx: RunContext[Any]) -> str:
        seen.append(ctx)
        return f"Answer as {ctx.tool_context['persona']}; {ctx.metadata.get('count', 0)} so far."

    @tool
    def count() -> tuple[str, ContextUpdate]:
        """Count one."""
        return "counted", ContextUpdate().increment("count")

    model = ScriptedModel([call("count"), "done"])
    agent = Agent("a", model=model, instructions=instructions, tools=[count])
    ref = rt.spawn(agent, tool_context={"persona": "a pirate"}, metadata={"count": 1})
    ref.run("count")
    # Worked out again for the second request: it sees the update of the first step.
    assert system_of(model, 0) == "Answer as a pirate; 1 so far."
    assert system_of(model, 1) == "Answer as a pirate; 2 so far."
    first, second = seen
    assert (first.agent_id, first.parent_id, first.run_id) == ("a", None, "a-run-1")
    assert (first.tool_call_id, first.tool_name) == ("", "")
    assert first.usage.requests == 0
    assert second.usage.requests == 1
    assert dict(second.metadata) == {"count": 2}
    with pytest.raises(TypeError):
        second.metadata["count"] = 3  # type: ignore[index]


def test_an_instructions_function_without_arguments_and_one_returning_none(
    rt: Runtime,
) -> None:
    model = ScriptedModel(["a", "b"])
    ref = rt.spawn(Agent("a", model=model, instructions=lambda: "Be kind."))
    ref.run("?")
    assert system_of(model) == "Be kind."
    quiet = ScriptedModel(["a"])
    rt.spawn(Agent("q", model=quiet, instructions=lambda ctx: None)).run("?")
    assert system_of(quiet) is None


def test_a_failing_instructions_function_fails_the_run_naming_the_agent(rt: Runtime) -> None:
    def instructions(ctx: RunContext[Any]) -> str:
        if ctx.run_id.endswith("-1"):
            raise LookupError("no profile")
        return "Be kind."

    model = ScriptedModel(["fine"])
    ref = rt.spawn(Agent("fragile", model=model, instructions=instructions))
    with pytest.raises(RunFailedError, match="agent 'fragile': its instructions function") as info:
        ref.run("?")
    assert isinstance(info.value.__cause__, LookupError)
    assert "LookupError: no profile" in str(info.value)
    assert model.requests == []  # no request with half a prompt
    assert types(ref.context().events)[-2:] == ["error", "turn_end"]
    # The agent lives on: the next run works.
    assert ref.run("again").output == "fine"


def test_an_instructions_function_returning_a_non_string_fails_the_run(rt: Runtime) -> None:
    ref = rt.spawn(Agent("a", model=ScriptedModel([]), instructions=lambda ctx: 42))
    with pytest.raises(RunFailedError, match="returned a int; it must return a string or None"):
        ref.run("?")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"instructions": 5}, "instructions must be a string or a function"),
        ({"instructions": lambda a, b: "x"}, r"needs the arguments \['a', 'b'\]"),
        ({"instructions": lambda *, who: "x"}, r"needs the arguments \['who'\]"),
        ({"system_prompt": ["x"]}, "system_prompt must be a string or None"),
    ],
)
def test_bad_instructions_are_refused_when_the_spec_is_made(
    kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(AgentDefinitionError, match=match):
        Agent("a", **kwargs)


def test_the_json_output_note_is_part_of_the_overlay(rt: Runtime) -> None:
    class City(BaseModel):
        name: str

    model = ScriptedModel(['{"name": "Oslo"}'])
    agent = Agent("a", model=model, output_type=City, instructions="Name a city.")
    ref = rt.spawn(agent)
    assert ref.run("?").output == City(name="Oslo")
    system = system_of(model)
    assert system is not None
    assert system.startswith("Name a city.\n\nGive your final answer")
    assert '"name"' in system  # the schema
    assert "system_message" not in types(ref.context().events)


def test_a_restored_session_takes_the_instructions_of_the_code_that_restores_it() -> None:
    store = MemoryStore()
    old = Agent(
        "assistant",
        model=ScriptedModel(["v1"], per_agent=True),
        system_prompt="You help Ada.",
        instructions="Answer in English.",
    )
    with Runtime(clock=FakeClock()) as rt:
        rt.spawn(old, store=store, session_id="s").run("hello")
    new_model = ScriptedModel(["v1", "v2"], per_agent=True)
    new = Agent(
        "assistant",
        model=new_model,
        system_prompt="You help Bob.",  # logged once: the session keeps the one it began with
        instructions="Answer in French.",
    )
    with Runtime(clock=FakeClock()) as rt:
        ref = rt.restore("s", store=store, agents=[new])
        assert ref.run("bonjour").output == "v2"
        assert logged_system(ref.context()) == ["You help Ada."]
    assert system_of(new_model, -1) == "You help Ada.\n\nAnswer in French."


def test_a_session_logged_with_its_instructions_does_not_see_them_twice() -> None:
    # Before instructions became an overlay they were logged as the leading system message.
    store = MemoryStore()
    legacy = Agent(
        "assistant", model=ScriptedModel(["v1"], per_agent=True), system_prompt="Be brief."
    )
    with Runtime(clock=FakeClock()) as rt:
        rt.spawn(legacy, store=store, session_id="s").run("hello")
    model = ScriptedModel(["v1", "v2"], per_agent=True)
    with Runtime(clock=FakeClock()) as rt:
        ref = rt.restore(
            "s", store=store, agents=[Agent("assistant", model=model, instructions="Be brief.")]
        )
        ref.run("again")
    assert system_of(model, -1) == "Be brief."


def test_the_sync_driver_puts_the_same_overlay() -> None:
    model = FunctionModel(lambda messages, tools: messages[0].content)
    agent = Agent(
        "a", model=model, system_prompt="Logged.", instructions=lambda ctx: f"For {ctx.agent_id}."
    )
    assert SyncDriver(agent).run("?").output == "Logged.\n\nFor a."


def test_the_overlay_is_what_the_model_sees_of_a_context() -> None:
    ctx = AgentContext("a")
    ctx.add_message(UserMessage(content="hi"))
    ctx.put_system_prompt_overlay("first")
    ctx.put_system_prompt_overlay("second")
    assert ctx.model_messages() == [SystemMessage(content="second"), UserMessage(content="hi")]
