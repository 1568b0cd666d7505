"""The issue's test: 1,000 children share a budget sized for 700 requests, over real HTTP.

The children's model is an OpenAI-wire server on loopback in its own process
(`bench.wire_server`); its counter says how many requests were actually sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from actors import Agent, Budget, Price, Runtime, ToolResultMessage, TreeLimits
from actors.exceptions import BudgetExceeded
from actors.models import OpenAIChatModel
from actors.testing import ScriptedModel, allow_model_requests, call
from bench.wire_server import serve, stats

CHILDREN = 1000
SENT = 700


@pytest.fixture(scope="module")
def wire() -> Iterator[str]:
    with serve() as url:
        yield url


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_thousand_children_sharing_a_budget_for_700_requests(wire: str) -> None:
    child = Agent(
        "w",
        # A loaded machine may be slow to connect: a failed request would free its place.
        model=OpenAIChatModel("fake", base_url=wire, api_key="test", timeout=90),
        model_settings={"max_tokens": 64},
    )
    root = Agent(
        "root",
        model=ScriptedModel([[call("w", task=f"item {i:04d}") for i in range(CHILDREN)], "x"]),
        subagents=[child],
    )
    price = Price(input=Decimal("0.15"), output=Decimal("0.60"))
    # The root's own request, then 700 of the children's: the budget has room for no more.
    budget = Budget(
        requests=SENT + 1,
        usd=Decimal("1"),
        prices={"scripted": Price(input=0, output=0), "openai:fake": price},
    )
    before = stats(wire)["requests"]
    limits = TreeLimits(max_children=CHILDREN, max_agents=CHILDREN + 1)
    with allow_model_requests(True), Runtime(limits=limits) as rt:
        ref = rt.spawn(root, budget=budget)
        with pytest.raises(BudgetExceeded) as raised:  # the root's answer found nothing left
            ref.run("fan out", timeout=150)
        ledger = rt._host.nodes[ref.agent_id].ledger
    sent = stats(wire)["requests"] - before
    results = [m for m in raised.value.messages if isinstance(m, ToolResultMessage)]
    refused = [r.content for r in results if r.is_error]
    assert len(results) == CHILDREN
    assert [r for r in refused if " failed: BudgetExceeded: " not in r] == []
    assert len(refused) == CHILDREN - SENT
    assert sent == SENT
    # What the provider reported, summed, is within every cap of the budget.
    assert ledger is not None
    assert ledger.reserved.requests == 0
    assert ledger.spent.requests == SENT + 1 <= budget.requests
    assert ledger.spent.usd <= budget.usd
    tree = raised.value.usage
    assert tree is not None
    assert tree.requests == SENT + 1
    assert ledger.spent.input_tokens == tree.input_tokens
    assert ledger.spent.output_tokens == tree.output_tokens
