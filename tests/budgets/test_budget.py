"""Budgets for a tree: reserve before a request, settle after it, refuse what does not fit."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from actors import Agent, Budget, Price, Runtime, ToolResultMessage, TreeLimits
from actors.exceptions import BudgetExceeded, RunFailedError, UserError
from actors.loop._budget import Amount, Ledger
from actors.loop._budget_log import spend_of
from actors.sim import Simulation
from actors.store import MemoryStore
from actors.testing import ScriptedModel, SyncDriver, call

WIDE = TreeLimits(max_children=2000, max_agents=3000)


def _fan_out(n: int, *, child_model: Any = None, width: int = 4) -> Agent:
    child = Agent("w", model=child_model or ScriptedModel(["ok"], per_agent=True))
    return Agent(
        "p",
        model=ScriptedModel([[call("w", task=f"{i:0{width}d}") for i in range(n)], "done"]),
        subagents=[child],
    )


def _results(messages: Any) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


def test_a_request_that_does_not_fit_fails_its_run_typed_and_nothing_is_sent() -> None:
    with Runtime(limits=WIDE) as rt:
        ref = rt.spawn(_fan_out(5), budget=Budget(requests=5))
        with pytest.raises(BudgetExceeded, match="budget requests=5 has 0 left") as raised:
            ref.run("go")
    error = raised.value
    # The parent's first request, then four children's; the fifth child and the parent's
    # answer found the budget spent: their runs ended typed, with the work so far.
    assert error.usage is not None
    assert error.usage.requests == 5
    results = _results(error.messages)
    refused = [r for r in results if r.is_error]
    assert len(results) == 5
    assert len(refused) == 1
    assert "BudgetExceeded" in refused[0].content
    assert "budget requests=5 has 0 left" in refused[0].content


def test_a_parent_gets_a_refused_childs_error_result_and_lives_on() -> None:
    middle = _fan_out(4)
    middle = Agent("m", model=middle.model, subagents=middle.subagents, budget=Budget(requests=3))
    top = Agent("top", model=ScriptedModel([call("m", task="t"), "top done"]), subagents=[middle])
    with Runtime(limits=WIDE) as rt:
        result = rt.spawn(top, budget=Budget(requests=100)).run("go")
    assert result.output == "top done"
    (m_result,) = _results(result.messages)
    assert m_result.is_error
    assert "BudgetExceeded" in m_result.content
    assert "budget requests=3 has 0 left" in m_result.content
    assert result.tree_usage.requests == 2 + 3  # top twice; m once and two of its children


def test_a_budget_on_the_agent_spec_covers_its_descendants() -> None:
    spec = _fan_out(3)
    spec = Agent(spec.name, model=spec.model, subagents=spec.subagents, budget=Budget(requests=3))
    driver = SyncDriver(spec, limits=WIDE)
    with pytest.raises(BudgetExceeded):
        driver.run("go")
    assert driver.context.usage.requests == 1


def test_a_childs_own_budget_nests_inside_the_trees() -> None:
    worker = Agent(
        "w",
        model=ScriptedModel([call("w2", task="x"), "ok"], per_agent=True),
        subagents=[Agent("w2", model=ScriptedModel(["deep"], per_agent=True))],
        budget=Budget(requests=2),  # its own request, then its child's: its answer is refused
    )
    parent = Agent("p", model=ScriptedModel([call("w", task="t"), "done"]), subagents=[worker])
    with Runtime(limits=WIDE) as rt:
        result = rt.spawn(parent, budget=Budget(requests=10)).run("go")
    (child_result,) = _results(result.messages)
    assert child_result.is_error
    assert "budget requests=2 has 0 left" in child_result.content
    assert result.tree_usage.requests == 4  # p twice, w once, w2 once


def test_reservations_and_settlements_are_logged_and_add_up() -> None:
    price = Price(input=Decimal("1"), output=Decimal("2"))
    budget = Budget(usd=Decimal("1"), prices={"scripted": price}, max_tokens=50)
    driver = SyncDriver(Agent("a", model=ScriptedModel(["one two three"]), budget=budget))
    driver.run("hi")
    events = driver.context.events
    # Both ride on events the step writes anyway: the request's header, the step's end.
    assert not [e for e in events if e.type in ("budget_reserved", "budget_settled")]
    reserved = [e.data["budget"] for e in events if e.type == "request_header"]
    settled = [e.data["budget"] for e in events if e.type == "step_end"]
    assert len(reserved) == len(settled) == 1
    assert reserved[0]["output_tokens"] == 50  # the budget's max_tokens: no worst case
    assert settled[0]["reserved"] == {k: reserved[0][k] for k in Amount._fields}
    usage = driver.context.usage
    spent = settled[0]["spent"]
    assert spent["input_tokens"] == usage.input_tokens
    assert spent["output_tokens"] == usage.output_tokens
    assert spent["nano_usd"] == (usage.input_tokens * 1 + usage.output_tokens * 2) * 1000
    assert spend_of(events) == Amount.from_json(spent)


def test_the_worst_case_sets_max_tokens_when_the_budget_caps_output() -> None:
    model = ScriptedModel(["ok"])
    driver = SyncDriver(Agent("a", model=model, budget=Budget(output_tokens=100, max_tokens=64)))
    driver.run("hi")
    assert model.requests[-1].settings.get("max_tokens") == 64
    counted = SyncDriver(Agent("a", model=(m := ScriptedModel(["ok"])), budget=Budget(requests=3)))
    counted.run("hi")
    assert "max_tokens" not in m.requests[-1].settings  # nothing to bound: sent as written


def test_a_dollar_budget_for_a_model_without_a_price_fails_saying_what_to_do() -> None:
    driver = SyncDriver(Agent("a", model=ScriptedModel(["ok"]), budget=Budget(usd=1)))
    with pytest.raises(RunFailedError, match=r"no known price.*Budget\(prices="):
        driver.run("hi")


def test_spend_reported_never_passes_a_dollar_budget() -> None:
    price = Price(input=Decimal("3"), output=Decimal("15"))
    budget = Budget(
        usd=Decimal("0.02"),
        prices={"scripted": Price(input=0, output=0), "w": price},
        max_tokens=100,
    )
    # Every child asks at once (virtual time 0), each reply takes a virtual second.
    sim = Simulation(seed=0, limits=WIDE)
    child_model = ScriptedModel(["a reply of some words"], per_agent=True, name="w", latency=1.0)
    result = sim.spawn(_fan_out(50, child_model=child_model), budget=budget).run("go")
    ledger = sim._host.cells[result.agent_id].node.ledger
    assert ledger is not None
    children = [r for r in _results(result.messages)]
    answered = [r for r in children if not r.is_error]
    refused = [r for r in children if r.is_error]
    assert answered
    assert refused
    assert ledger.reserved == Amount()
    assert ledger.spent.usd <= Decimal("0.02")
    assert ledger.spent.requests == result.tree_usage.requests


def test_a_simulation_enforces_the_budget_the_same_way_and_reproducibly() -> None:
    def once() -> list[str]:
        sim = Simulation(seed=1, limits=WIDE)
        child_model = ScriptedModel(["ok"], per_agent=True, latency=lambda _r, rng: rng.random())
        ref = sim.spawn(_fan_out(5, child_model=child_model), budget=Budget(requests=5))
        with pytest.raises(BudgetExceeded) as raised:
            ref.run("go")
        return [r.content for r in _results(raised.value.messages)]

    first = once()
    assert first.count("ok") == 4  # the parent's first request and four children's
    assert once() == first


def test_budget_arguments_are_checked() -> None:
    with Runtime() as rt, pytest.raises(UserError, match="budget must be a Budget"):
        rt.spawn(Agent("a", model=ScriptedModel(["ok"])), budget={"usd": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Budget(requests=-1)


def test_a_nested_ledger_reserves_all_or_nothing() -> None:
    outer = Ledger(Budget(requests=1))
    inner = Ledger(Budget(requests=5), outer)
    assert inner.reserve(Amount(1)) is None
    assert inner.reserve(Amount(1)) is not None
    assert inner.reserved == outer.reserved == Amount(1)
    inner.settle(Amount(1), Amount(1, 3, 4, 5))
    assert outer.spent == Amount(1, 3, 4, 5)
    assert outer.reserved == Amount()


class _FlakyStore(MemoryStore):
    """A store that refuses writes while ``broken`` is set."""

    broken = False

    def append_events(self, *args: Any, **kwargs: Any) -> Any:
        if self.broken:
            raise OSError("disk full")
        return super().append_events(*args, **kwargs)


def test_a_budgeted_request_whose_reservation_cannot_be_written_is_not_sent() -> None:
    store = _FlakyStore()
    model = ScriptedModel(["first", "second"])
    with Runtime() as rt:
        ref = rt.spawn(
            Agent("a", model=model), store=store, session_id="s", budget=Budget(requests=5)
        )
        assert ref.run("one").output == "first"
        store.broken = True
        with pytest.raises(RunFailedError, match="could not write"):
            ref.run("two")
        ledger = rt._host.nodes["a"].ledger
        assert ledger is not None
        assert len(model.requests) == 1  # the second request was never sent
        assert ledger.reserved == Amount()  # and its reservation was released
        assert ledger.spent.requests == 1


def test_a_failed_request_reports_nothing_spent_and_releases_its_reservation() -> None:
    spec = Agent("a", model=ScriptedModel([RuntimeError("provider down")]))
    with Runtime() as rt:
        ref = rt.spawn(spec, budget=Budget(requests=1))
        with pytest.raises(RunFailedError, match="provider down"):
            ref.run("hi")
        ledger = rt._host.nodes["a"].ledger
        assert ledger is not None
        assert ledger.reserved == Amount()
        assert ledger.spent == Amount()
        events = ref.context().events
    settled = [e.data["budget"] for e in events if e.type == "step_end"]
    assert [s["spent"]["requests"] for s in settled] == [0]


def test_a_growing_transcript_is_counted_as_if_read_whole_each_time() -> None:
    from actors import AgentContext, AssistantMessage, SystemMessage, ToolCall, UserMessage
    from actors.loop._reservation import BudgetGate, _messages_size

    gate = BudgetGate(Ledger(Budget(requests=10)), AgentContext("a"))
    messages: list[Any] = [SystemMessage(content="sys")]
    for i in range(20):
        messages.append(UserMessage(content="u" * i))
        call_i = ToolCall(id=f"c{i}", name="t", arguments={"x": i})
        messages.append(AssistantMessage(content="a", tool_calls=(call_i,)))
        assert gate._transcript_size(messages) == _messages_size(messages)
        messages[0] = SystemMessage(content="sys" + "o" * i)  # the overlay may change
    shorter = messages[:5]  # a history processor's view: read again
    assert gate._transcript_size(shorter) == _messages_size(shorter)


def test_tree_usage_reports_what_the_tree_cost_as_the_budget_priced_it() -> None:
    prices = {
        "scripted": Price(input=Decimal(1), output=Decimal(2)),
        "w": Price(input=Decimal(3), output=Decimal(5)),
    }
    child_model = ScriptedModel(["a b c"], per_agent=True, name="w")
    with Runtime(limits=WIDE) as rt:
        ref = rt.spawn(_fan_out(3, child_model=child_model), budget=Budget(prices=prices))
        result = ref.run("go")
        ledger = rt._host.nodes[ref.agent_id].ledger
    assert ledger is not None

    def dollars(usage: Any, price: Price) -> Decimal:
        return price.cost(usage.input_tokens, usage.output_tokens)

    own = result.usage
    assert own.cost == dollars(own, prices["scripted"])
    assert result.tree_usage.cost == ledger.spent.usd
    assert result.tree_usage.cost > own.cost
    # Without a price there is no cost to report.
    plain = SyncDriver(Agent("a", model=ScriptedModel(["ok"]), budget=Budget(requests=2)))
    assert plain.run("hi").usage.cost is None
    assert SyncDriver(Agent("a", model=ScriptedModel(["ok"]))).run("hi").usage.cost is None


def test_a_budget_prices_cached_input_at_the_cache_rate() -> None:
    from actors import ModelRequest, ModelResponse, Usage
    from actors.context._messages import AssistantMessage

    class Cached:
        name = "cached"

        async def request(self, request: ModelRequest) -> ModelResponse:
            usage = Usage(requests=1, input_tokens=1000, output_tokens=10, cache_read_tokens=800)
            return ModelResponse(message=AssistantMessage(content="ok"), usage=usage)

    price = Price(input=Decimal(1), output=Decimal(2), cache_read=Decimal("0.1"))
    agent = Agent("a", model=Cached(), budget=Budget(prices={"cached": price}))
    result = SyncDriver(agent).run("hi")
    # 200 plain input tokens at $1/M, 800 cached at $0.1/M, 10 out at $2/M.
    assert result.usage.cost == Decimal("0.0003")


def test_a_reservation_covers_cache_writes_priced_above_the_input_rate() -> None:
    """Anthropic bills a cache write at 1.25x input: the worst case reserves for it."""
    from actors import ModelRequest, ModelResponse, Usage
    from actors.context._messages import AssistantMessage
    from actors.exceptions import BudgetExceeded

    class Writing:
        name = "writing"

        def __init__(self) -> None:
            self.sent = 0

        async def request(self, request: ModelRequest) -> ModelResponse:
            self.sent += 1  # every input token written to the cache, as a first request may
            usage = Usage(requests=1, input_tokens=1000, output_tokens=0, cache_write_tokens=1000)
            return ModelResponse(message=AssistantMessage(content="ok"), usage=usage)

    price = Price(input=Decimal(1), output=Decimal(1), cache_write=Decimal("1.25"))
    model = Writing()
    # ~1,005 input tokens: $0.001005 at the input rate fits, $0.00125 written to the cache not.
    budget = Budget(usd=Decimal("0.0012"), max_tokens=1, prices={"writing": price})
    with pytest.raises(BudgetExceeded, match="nothing was sent"):
        SyncDriver(Agent("a", model=model, budget=budget)).run("x" * 4000)
    assert model.sent == 0
