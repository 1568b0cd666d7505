"""Budgets for a tree: a ledger every agent of the tree reserves against before a request.

A `Budget` given at spawn (``runtime.spawn(agent, budget=...)``) or on an `Agent` covers the
agent and every descendant. Before each model request the loop reserves the request's worst
case (its counted input, its ``max_tokens`` out, at the model's price) on the `Ledger` the
host gave it; a reservation that does not fit fails the run with `BudgetExceeded` and nothing
is sent. The reply settles the reservation at what the provider reported. Both are logged
(``budget_reserved``, ``budget_settled``), so a restore rebuilds the ledger from the tree's
logs and counts a reservation whose reply never came as spent: what providers report never
passes the budget, whatever crashed.

The loop calls two functions here (`BudgetGate.reserve`, `BudgetGate.settle`); hosts make
the ledgers (`ledger_for`) and rebuild them on restore (`spend_of`, `budget_of`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from actors.exceptions import BudgetExceeded, RunError, RunFailedError, UserError
from actors.models._prices import NANO, Price, nano_cost, price_of

if TYPE_CHECKING:
    from actors.context._agent_context import AgentContext
    from actors.context._events import Event
    from actors.loop._types import ModelReplied
    from actors.models._model import Model, ModelRequest

__all__ = [
    "Amount",
    "Budget",
    "BudgetGate",
    "Ledger",
    "budget_of",
    "check_budget",
    "estimate_input_tokens",
    "ledger_for",
    "spend_of",
]


class Budget(BaseModel):
    """What a tree of agents may spend, all of it together; None means no cap.

    Given at spawn (``runtime.spawn(agent, budget=...)``) or on an `Agent` (then it covers that
    agent and its descendants, inside any budget above it), it holds across every descendant.
    Each request reserves its worst case first; one that does not fit fails its run with
    `actors.exceptions.BudgetExceeded`, and nothing is sent.

    Attributes:
        usd: US dollars, priced by ``prices`` or by ``genai-prices`` (``actors[prices]``).
        input_tokens: Input tokens, as providers report them.
        output_tokens: Output tokens.
        requests: Model requests.
        prices: Prices by model name (``"openai:gpt-4o-mini"`` or ``"gpt-4o-mini"``); they
            win over ``genai-prices``.
        max_tokens: The output worst case of a request whose settings give no ``max_tokens``,
            when the budget caps ``usd`` or ``output_tokens``: such a request is sent with it
            as its ``max_tokens``, so the worst case holds.

    Example:
        >>> Budget(usd=2, requests=100).requests
        100
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    usd: Decimal | None = Field(default=None, ge=0)
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    requests: NonNegativeInt | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    max_tokens: PositiveInt = 4096


class Amount(NamedTuple):
    """An amount of a budget: requests, tokens in and out, and money in nano-dollars."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    nano_usd: int = 0

    def plus(self, other: Amount) -> Amount:
        """This amount and ``other`` (``+`` would join the tuples)."""
        return Amount(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.nano_usd + other.nano_usd,
        )

    def minus(self, other: Amount) -> Amount:
        """This amount less ``other``."""
        return Amount(
            self.requests - other.requests,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.nano_usd - other.nano_usd,
        )

    @property
    def usd(self) -> Decimal:
        """The money, in dollars."""
        return Decimal(self.nano_usd) / NANO

    def to_json(self) -> dict[str, int]:
        """The amount as a logged event's data."""
        return self._asdict()

    @classmethod
    def from_json(cls, data: Any) -> Amount:
        """The amount a logged event holds (missing fields are 0)."""
        if not isinstance(data, dict):
            return ZERO
        return cls(*(int(data.get(name, 0)) for name in cls._fields))


ZERO = Amount()
_NAMES = ("requests", "input_tokens", "output_tokens", "usd")


class Ledger:
    """What a tree (or a subtree with a budget of its own) has spent and holds reserved.

    Shared by every agent under it in one process; a nested ledger reserves in its parents
    too, all or nothing, under the one lock of its root.
    """

    __slots__ = ("_caps", "budget", "lock", "parent", "prices", "reserved", "spent")

    def __init__(self, budget: Budget, parent: Ledger | None = None) -> None:
        self.budget = budget
        self.parent = parent
        self.lock: threading.Lock = parent.lock if parent is not None else threading.Lock()
        self.spent = ZERO
        self.reserved = ZERO
        usd = None if budget.usd is None else int(budget.usd * NANO)
        self._caps = (budget.requests, budget.input_tokens, budget.output_tokens, usd)
        # The nearest budget's price of a model wins.
        self.prices: dict[str, Price] = {**(parent.prices if parent else {}), **budget.prices}

    def chain(self) -> Iterator[Ledger]:
        """This ledger, then the ones it nests in, up to the tree's."""
        ledger: Ledger | None = self
        while ledger is not None:
            yield ledger
            ledger = ledger.parent

    def caps(self, field: int) -> bool:
        """Whether this ledger or one above caps field ``field`` (an index into `Amount`)."""
        return any(ledger._caps[field] is not None for ledger in self.chain())

    def reserve(self, amount: Amount) -> str | None:
        """Hold ``amount`` in every ledger of the chain, or none; a refusal says why."""
        with self.lock:
            for ledger in self.chain():
                problem = ledger._overdrawn(amount)
                if problem is not None:
                    return problem
            for ledger in self.chain():
                ledger.reserved = ledger.reserved.plus(amount)
        return None

    def settle(self, reserved: Amount, spent: Amount) -> None:
        """A reservation ended: release it, and count what was really spent."""
        with self.lock:
            for ledger in self.chain():
                ledger.reserved = ledger.reserved.minus(reserved)
                ledger.spent = ledger.spent.plus(spent)

    def charge(self, spent: Amount) -> None:
        """Count ``spent`` (a restore, from the logs) in every ledger of the chain."""
        self.settle(ZERO, spent)

    def _overdrawn(self, amount: Amount) -> str | None:
        used = self.spent.plus(self.reserved)
        for index, cap in enumerate(self._caps):
            if cap is not None and used[index] + amount[index] > cap:
                name = _NAMES[index]
                if index == 3:
                    return (
                        f"budget usd={self.budget.usd} has ${Decimal(cap - used[3]) / NANO} "
                        f"left, and this request may cost up to ${Decimal(amount[3]) / NANO}"
                    )
                return (
                    f"budget {name}={cap} has {cap - used[index]} left, and this request "
                    f"needs up to {amount[index]}"
                )
        return None

    def __repr__(self) -> str:
        return f"<Ledger spent={tuple(self.spent)} reserved={tuple(self.reserved)}>"


def check_budget(budget: object) -> Budget | None:
    """``budget`` if it is a `Budget` or None; a `UserError` saying what it was otherwise."""
    if budget is None or isinstance(budget, Budget):
        return budget
    raise UserError(
        f"budget must be a Budget (e.g. Budget(usd=5)) or None, got {type(budget).__name__}"
    )


def ledger_for(parent: Ledger | None, budget: Budget | None) -> Ledger | None:
    """The ledger of an agent: its parent's, nested under a budget of its own if it has one."""
    if budget is None:
        return parent
    return Ledger(budget, parent)


def estimate_input_tokens(model: Model, request: ModelRequest) -> int:
    """The input tokens a request is reserved at, before it is sent.

    For now an estimate: a token per four characters of the request's messages and tools as
    JSON (the one place to switch to the model's own count once models count tokens).
    """
    del model  # the model will count its own requests; the estimate does not need it
    size = 0
    for message in request.messages:
        size += len(message.model_dump_json())
    for tool in request.tools:
        size += len(tool.name) + len(tool.description) + len(str(tool.parameters))
    return size // 4 + 1


class BudgetGate:
    """One agent's side of its tree's ledger: its open reservations, and their events.

    Args:
        ledger: The ledger the agent reserves against.
        ctx: The agent's context (where reservations and settlements are logged).
    """

    __slots__ = ("ctx", "ledger", "open")

    def __init__(self, ledger: Ledger, ctx: AgentContext) -> None:
        self.ledger = ledger
        self.ctx = ctx
        self.open: dict[tuple[str, int], tuple[Amount, str]] = {}  # (run, step): amount, model

    def reserve(
        self, model: Model, request: ModelRequest, run_id: str, step: int
    ) -> ModelRequest | RunError:
        """Reserve ``request``'s worst case: the request to send, or why the run must end."""
        ledger = self.ledger
        settings = request.settings
        max_tokens = settings.get("max_tokens")
        if max_tokens is None and (ledger.caps(2) or ledger.caps(3)):
            # Without a cap on the reply there is no worst case: send the budget's.
            max_tokens = ledger.budget.max_tokens
            request = dataclasses.replace(request, settings={**settings, "max_tokens": max_tokens})
        input_tokens = estimate_input_tokens(model, request)
        output_tokens = max_tokens or 0
        nano = 0
        price = price_of(model.name, ledger.prices)
        if price is not None:
            nano = nano_cost(price, input_tokens, output_tokens)
        elif ledger.caps(3):
            return RunFailedError(
                f"agent {self.ctx.agent_id!r}: its budget is in dollars and model "
                f"{model.name!r} has no known price; give it in Budget(prices={{...}}) or "
                "install genai-prices (pip install 'actors[prices]')"
            )
        amount = Amount(1, input_tokens, output_tokens, nano)
        problem = ledger.reserve(amount)
        if problem is not None:
            return BudgetExceeded(f"agent {self.ctx.agent_id!r}: {problem}; nothing was sent")
        self.open[run_id, step] = (amount, model.name)
        self.ctx._record("budget_reserved", {"run_id": run_id, "step": step, **amount._asdict()})
        return request

    def settle(self, message: ModelReplied) -> None:
        """The reply to a reserved request came (or its failure): settle what it reported.

        A failure reports nothing spent, so it releases the reservation.
        """
        entry = self.open.pop((message.run_id, message.step), None)
        if entry is None:
            return
        reserved, model_name = entry
        spent = ZERO
        response = message.response
        if response is not None:
            usage = response.usage
            nano = 0
            price = price_of(response.model_name or model_name, self.ledger.prices)
            if price is None and response.model_name:
                price = price_of(model_name, self.ledger.prices)
            if price is not None:
                nano = nano_cost(price, usage.input_tokens, usage.output_tokens)
            spent = Amount(usage.requests, usage.input_tokens, usage.output_tokens, nano)
        self.ledger.settle(reserved, spent)
        self.ctx._record(
            "budget_settled",
            {
                "run_id": message.run_id,
                "step": message.step,
                "reserved": reserved.to_json(),
                "spent": spent.to_json(),
            },
        )


def spend_of(events: Iterable[Event]) -> Amount:
    """What one agent's log says it spent, counting a reservation never settled as spent."""
    total = ZERO
    for event in events:
        if event.type == "budget_reserved":
            total = total.plus(Amount.from_json(event.data))
        elif event.type == "budget_settled":
            data = event.data
            total = total.plus(Amount.from_json(data.get("spent"))).minus(
                Amount.from_json(data.get("reserved"))
            )
    return total


def budget_of(events: Iterable[Event]) -> Budget | None:
    """The budget a root was spawned with, as its log holds it (``budget_set``), or None."""
    found: Budget | None = None
    for event in events:
        if event.type == "budget_set":
            found = Budget.model_validate(event.data["budget"])
    return found
