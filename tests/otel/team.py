"""A research team: a lead, two researchers in parallel, each delegating to a fact checker."""

from __future__ import annotations

from typing import Any

from actors import Agent, RunContext, Subagent, tool
from actors.testing import ScriptedModel, call

checker = Agent(
    "checker",
    model=ScriptedModel(["Checked: true."], per_agent=True),
    description="Checks one claim.",
)


@tool
def check(ctx: RunContext, claim: str) -> str:
    """Have a fact checker look at a claim.

    Args:
        claim: The claim.
    """
    return str(ctx.delegate(checker, f"Check: {claim}", timeout=30))


def team() -> Agent[Any]:
    researcher = Agent(
        "researcher",
        model=ScriptedModel([call("check", claim="actors own state"), "Found it."], per_agent=True),
        tools=[check],
        description="Researches one question.",
    )
    return Agent(
        "lead",
        model=ScriptedModel(
            [
                [call("researcher", task="Actors?"), call("researcher", task="Mailboxes?")],
                "Both agree.",
            ]
        ),
        subagents=[Subagent(researcher, timeout=30)],
    )
