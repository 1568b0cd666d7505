"""The `Agent` spec: immutable configuration, checked when it is built."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from actors import Agent, Runtime, Subagent, UsageLimits
from actors.exceptions import AgentDefinitionError
from actors.testing import ScriptedModel


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"name": ""}, "non-empty name"),
        ({"name": "  "}, "non-empty name"),
        ({"name": "a", "max_iterations": 0}, "max_iterations"),
        ({"name": "a", "tool_timeout": 0}, "tool_timeout"),
        ({"name": "a", "model_timeout": -1}, "model_timeout"),
        ({"name": "a", "tool_retries": -1}, "retry budgets"),
        ({"name": "a", "subagents": ["not an agent"]}, "must be an Agent or a Subagent"),
        ({"name": "a", "subagents": [Subagent(Agent("c"), timeout=0)]}, "timeouts must be"),
    ],
)
def test_bad_specs_are_refused_naming_the_problem(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(AgentDefinitionError, match=needle):
        Agent(**kwargs)


def test_specs_are_immutable_and_compare_by_identity() -> None:
    agent = Agent("a", usage_limits=UsageLimits(requests=3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        agent.name = "b"  # type: ignore[misc]
    assert agent == agent
    assert agent != Agent("a", usage_limits=UsageLimits(requests=3))
    assert len({agent, agent}) == 1


def test_subagents_as_a_list_or_a_mapping() -> None:
    child = Agent("researcher", description="Finds things.")
    listed = Agent("p", subagents=[child, Subagent(child, name="second", keep=True)])
    assert list(listed.subagent_map) == ["researcher", "second"]
    assert listed.subagent_map["second"].keep
    mapped = Agent("p", subagents={"finder": child, "keeper": Subagent(child, keep=True)})
    assert list(mapped.subagent_map) == ["finder", "keeper"]
    assert mapped.subagent_map["keeper"].keep
    assert mapped.subagent_map["keeper"].tool_name == "keeper"


def test_tool_and_subagent_names_must_not_clash() -> None:
    def researcher() -> str:
        """Clashes with the subagent."""
        return ""

    with pytest.raises(AgentDefinitionError, match="researcher"):
        Agent("p", tools=[researcher], subagents=[Agent("researcher")])


def test_one_spec_backs_many_agents_each_with_its_own_context() -> None:
    agent = Agent("shared", model=ScriptedModel(["one", "two"], per_agent=True))
    with Runtime() as rt:
        first, second = rt.spawn(agent), rt.spawn(agent)
        first.run("a")
        second.run("b")
        assert [m.content for m in first.context().messages] == ["a", "one"]
        assert [m.content for m in second.context().messages] == ["b", "one"]
