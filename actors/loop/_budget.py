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
from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt, ValidationError

from actors.context._messages import AssistantMessage
from actors.exceptions import (
    BudgetExceeded,
    RunError,
    RunFailedError,
    SerializationError,
    UserError,
)
from actors.models._prices import NANO, Price, Rates, nano_at, price_of, rates_of

if TYPE_CHECKING:
    from actors.context._agent_context import AgentContext
    from actors.context._events import Event
    from actors.context._messages import Message
    from actors.loop._types import ModelReplied
    from actors.models._model import Model, ModelRequest, ModelSettings, ToolDefinition

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
    too, all or nothing, under the one lock of its root. Amounts are (requests, input tokens,
    output tokens, nano-dollars), as in `Amount`.
    """

    __slots__ = (
        "_caps",
        "_chain",
        "_reserved",
        "_spent",
        "bounds_reply",
        "budget",
        "in_dollars",
        "lock",
        "parent",
        "prices",
    )

    def __init__(self, budget: Budget, parent: Ledger | None = None) -> None:
        self.budget = budget
        self.parent = parent
        self.lock: threading.Lock = parent.lock if parent is not None else threading.Lock()
        # Counters changed in place under the lock (a hot path: two changes per request).
        self._spent = [0, 0, 0, 0]
        self._reserved = [0, 0, 0, 0]
        usd = None if budget.usd is None else int(budget.usd * NANO)
        self._caps = (budget.requests, budget.input_tokens, budget.output_tokens, usd)
        self._chain: tuple[Ledger, ...] = (self, *(parent._chain if parent else ()))
        # The nearest budget's price of a model wins.
        self.prices: dict[str, Price] = {**(parent.prices if parent else {}), **budget.prices}
        # Known once (a chain never changes): whether any budget of it caps money, and whether
        # a request's reply needs a bound (money or output tokens are capped).
        self.in_dollars: bool = usd is not None or (parent is not None and parent.in_dollars)
        self.bounds_reply: bool = (
            self.in_dollars
            or budget.output_tokens is not None
            or (parent is not None and parent.bounds_reply)
        )

    @property
    def spent(self) -> Amount:
        """What the requests under this ledger were reported to spend (or held when lost)."""
        return Amount(*self._spent)

    @property
    def reserved(self) -> Amount:
        """What requests in flight under this ledger hold."""
        return Amount(*self._reserved)

    def chain(self) -> Iterator[Ledger]:
        """This ledger, then the ones it nests in, up to the tree's."""
        return iter(self._chain)

    def reserve(self, amount: tuple[int, int, int, int]) -> str | None:
        """Hold ``amount`` in every ledger of the chain, or none; a refusal says why."""
        with self.lock:
            for ledger in self._chain:
                caps, spent, held = ledger._caps, ledger._spent, ledger._reserved
                for index in (0, 1, 2, 3):
                    cap = caps[index]
                    if cap is not None and spent[index] + held[index] + amount[index] > cap:
                        return ledger._refusal(index, amount)
            for ledger in self._chain:
                held = ledger._reserved
                held[0] += amount[0]
                held[1] += amount[1]
                held[2] += amount[2]
                held[3] += amount[3]
        return None

    def settle(self, reserved: tuple[int, ...], spent: tuple[int, ...]) -> None:
        """A reservation ended: release it, and count what was really spent."""
        with self.lock:
            for ledger in self._chain:
                held, used = ledger._reserved, ledger._spent
                for index in (0, 1, 2, 3):
                    held[index] -= reserved[index]
                    used[index] += spent[index]

    def charge(self, spent: tuple[int, ...]) -> None:
        """Count ``spent`` (a restore, from the logs) in every ledger of the chain."""
        self.settle(ZERO, spent)

    def _refusal(self, index: int, amount: tuple[int, ...]) -> str:
        left = self._caps[index]
        assert left is not None
        left -= self._spent[index] + self._reserved[index]
        if index == 3:
            return (
                f"budget usd={self.budget.usd} has ${Decimal(left) / NANO} left, and this "
                f"request may cost up to ${Decimal(amount[3]) / NANO}"
            )
        return (
            f"budget {_NAMES[index]}={self._caps[index]} has {left} left, and this request "
            f"needs up to {amount[index]}"
        )

    def __repr__(self) -> str:
        return f"<Ledger spent={tuple(self._spent)} reserved={tuple(self._reserved)}>"


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

    For now an estimate: a token per four characters of what the request carries (texts,
    tool calls' arguments, tool definitions), with an allowance per message for its framing.
    This is the one place to switch to the model's own count once models count tokens.
    """
    del model  # the model will count its own requests; the estimate does not need it
    return (_messages_size(request.messages) + tools_size(request.tools)) // 4 + 1


def _messages_size(messages: Sequence[Message], start: int = 0, stop: int | None = None) -> int:
    size = 0
    for index in range(start, len(messages) if stop is None else stop):
        message = messages[index]
        size += len(message.content) + _FRAMING
        # An isinstance, not a getattr: a missing attribute costs pydantic a formatted error.
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                size += len(call.name) + len(str(call.arguments)) + _FRAMING
    return size


def tools_size(tools: Sequence[ToolDefinition]) -> int:
    """The characters of the tool definitions a request carries (their names, texts, schemas)."""
    return sum(len(t.name) + len(t.description) + len(str(t.parameters)) + _FRAMING for t in tools)


_FRAMING = 16  # characters a message or a tool costs besides its text (role, ids, quotes)


class BudgetGate:
    """One agent's side of its tree's ledger: its open reservations, and their events.

    Args:
        ledger: The ledger the agent reserves against.
        ctx: The agent's context (where reservations and settlements are logged).
    """

    __slots__ = ("_counted", "_rates", "_tools", "ctx", "ledger", "open")

    def __init__(self, ledger: Ledger, ctx: AgentContext) -> None:
        self.ledger = ledger
        self.ctx = ctx
        # (run, step) of each request in flight: what it reserved, and its model's name
        self.open: dict[tuple[str, int], tuple[tuple[int, int, int, int], str]] = {}
        self._rates: dict[str, Rates | None] = {}  # by model name, looked up once
        self._tools: tuple[object, int] | None = None  # the tools last sent, and their size
        # How many messages the last request had, its last one, and their size in characters
        self._counted: tuple[int, object, int] = (0, None, 0)

    def settings(self, settings: ModelSettings) -> ModelSettings:
        """``settings`` with the bound a worst case needs.

        Without a cap on the reply there is no worst case, so a budget that caps money or
        output tokens sends its own ``max_tokens`` when the settings give none.
        """
        if "max_tokens" in settings or not self.ledger.bounds_reply:
            return settings
        return {**settings, "max_tokens": self.ledger.budget.max_tokens}

    def _transcript_size(self, messages: Sequence[Message]) -> int:
        # A transcript grows at its end: the part the last request had is counted once (a
        # long session's request is not read whole each time). The first message is counted
        # every time (the instructions overlay joins it), and a transcript that changed before
        # its end (a history processor's view, a compaction) is read again.
        total = len(messages)
        if not total:
            return 0
        count, last, size = self._counted
        if count > 1 and total >= count and messages[count - 1] is last:
            size += _messages_size(messages, count)
        else:
            size = _messages_size(messages, 1)
        self._counted = (total, messages[total - 1], size)
        return size + _messages_size(messages, 0, 1)

    def _price(self, model_name: str) -> Rates | None:
        try:
            return self._rates[model_name]
        except KeyError:
            price = price_of(model_name, self.ledger.prices)
            rates = self._rates[model_name] = None if price is None else rates_of(price)
            return rates

    def reserve(
        self, model: Model, request: ModelRequest, run_id: str, step: int
    ) -> ModelRequest | RunError:
        """Reserve ``request``'s worst case: the request to send, or why the run must end."""
        ledger = self.ledger
        max_tokens = request.settings.get("max_tokens")
        if max_tokens is None and ledger.bounds_reply:  # sent without the agent's settings
            max_tokens = ledger.budget.max_tokens
            request = dataclasses.replace(request, settings=self.settings(request.settings))
        # The tools of an agent change rarely (toolsets): their size is counted once each.
        tools = request.tools
        sized = self._tools
        if sized is None or sized[0] is not tools:
            sized = self._tools = (tools, tools_size(tools))
        input_tokens = (self._transcript_size(request.messages) + sized[1]) // 4 + 1
        output_tokens = max_tokens or 0
        nano = 0
        price = self._price(model.name)
        if price is not None:
            nano = nano_at(price, input_tokens, output_tokens)
        elif ledger.in_dollars:
            return RunFailedError(
                f"agent {self.ctx.agent_id!r}: its budget is in dollars and model "
                f"{model.name!r} has no known price; give it in Budget(prices={{...}}) or "
                "install genai-prices (pip install 'actors[prices]')"
            )
        amount = (1, input_tokens, output_tokens, nano)
        problem = ledger.reserve(amount)
        if problem is not None:
            return BudgetExceeded(f"agent {self.ctx.agent_id!r}: {problem}; nothing was sent")
        self.open[run_id, step] = (amount, model.name)
        self.ctx._record(
            "budget_reserved",
            {
                "run_id": run_id,
                "step": step,
                "requests": 1,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "nano_usd": nano,
            },
        )
        return request

    def settle(self, message: ModelReplied) -> None:
        """The reply to a reserved request came (or its failure): settle what it reported.

        A failure reports nothing spent, so it releases the reservation.
        """
        entry = self.open.pop((message.run_id, message.step), None)
        if entry is None:
            return
        reserved, model_name = entry
        spent: tuple[int, int, int, int] = ZERO
        response = message.response
        if response is not None:
            usage = response.usage
            nano = 0
            price = self._price(response.model_name or model_name)
            if price is None and response.model_name:
                price = self._price(model_name)
            if price is not None:
                nano = nano_at(price, usage.input_tokens, usage.output_tokens)
            spent = (usage.requests, usage.input_tokens, usage.output_tokens, nano)
        self.ledger.settle(reserved, spent)
        self.ctx._record(
            "budget_settled",
            {
                "run_id": message.run_id,
                "step": message.step,
                "reserved": {
                    "requests": reserved[0],
                    "input_tokens": reserved[1],
                    "output_tokens": reserved[2],
                    "nano_usd": reserved[3],
                },
                "spent": {
                    "requests": spent[0],
                    "input_tokens": spent[1],
                    "output_tokens": spent[2],
                    "nano_usd": spent[3],
                },
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
    """The budget a root was spawned with, as its log holds it (``budget_set``), or None.

    Raises:
        SerializationError: the log's budget cannot be read (the log is damaged).
    """
    found: Budget | None = None
    for event in events:
        if event.type == "budget_set":
            try:
                found = Budget.model_validate(event.data["budget"])
            except ValidationError as exc:
                raise SerializationError(
                    f"event {event.seq} (budget_set) holds no budget that can be read: "
                    f"{exc.errors()[0].get('msg')}"
                ) from None
    return found
