"""One agent's reservations on its budget's ledger: what the loop calls before and after a request.

Before each model request `BudgetGate.reserve` counts the request's worst case (its input, as
estimated here, and its ``max_tokens`` of output, at the model's price), holds it on the
`Ledger` (or refuses: `BudgetExceeded`, and nothing is sent), and puts it in the request's
``request_header`` (``budget``); `BudgetGate.settle` releases it at what the reply reported,
which the loop puts in the step's ``step_end`` (``budget``), or, when no ``step_end`` comes
for it, logs as ``budget_settled`` (`BudgetGate.log_settled`). Folding them into events the
step writes anyway keeps a budget's cost per request at one lock and no event of its own.
Under a shared budget (kept in the store) the reservation is also a *hold* there, named in
the header's ``budget`` (``hold``) and again in its settlement, so that a restore finds the
holds a crash left open. The store is called on the agent's thread, like the store writes of
each step: a store that cannot be reached fails the run (`RunFailedError`) before anything is
sent. See `actors.loop._budget` for the budget and its ledger.
"""

from __future__ import annotations

import dataclasses
import itertools
import secrets
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from actors.context._messages import AssistantMessage
from actors.context._parts import content_size
from actors.context._usage import usage_of
from actors.exceptions import BudgetExceeded, RunError, RunFailedError
from actors.loop._budget import ZERO, Ledger
from actors.models._prices import NANO, Rates, nano_at, price_of, rates_of

if TYPE_CHECKING:
    from actors.context._agent_context import AgentContext
    from actors.context._messages import Message
    from actors.context._usage import Usage
    from actors.loop._types import ModelReplied
    from actors.models._model import Model, ModelRequest, ModelSettings, ToolDefinition

__all__ = ["BudgetGate", "estimate_input_tokens", "tools_size"]


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
    # islice walks the sequence's own iterator: a `MessageView` indexed one message at a time
    # would run its Python __getitem__ per message.
    for message in itertools.islice(messages, start, stop):
        content = message.content
        size += (len(content) if type(content) is str else content_size(content)) + _FRAMING
        # An isinstance, not a getattr: a missing attribute costs pydantic a formatted error.
        if isinstance(message, AssistantMessage) and message.tool_calls:
            for call in message.tool_calls:
                size += len(call.name) + len(str(call.arguments)) + _FRAMING
    return size


def tools_size(tools: Sequence[ToolDefinition]) -> int:
    """The characters of the tool definitions a request carries (their names, texts, schemas)."""
    size = 0
    sizes = _SCHEMA_SIZES
    for tool in tools:
        # A tool's schema is made once and shared by the definitions of every agent of its
        # spec: it is written out and counted once, not once per agent.
        schema = tool.parameters
        known = sizes.get(id(schema))
        if known is None or known[0] is not schema:
            if len(sizes) >= _SCHEMA_SIZES_KEPT:
                sizes.clear()
            known = sizes[id(schema)] = (schema, len(str(schema)))
        size += len(tool.name) + len(tool.description) + known[1] + _FRAMING
    return size


# The written-out size of tool schemas by id, each with its schema (kept alive, so that its id
# is not reused while it is here). A dict's get and set are atomic: no lock.
_SCHEMA_SIZES: dict[int, tuple[object, int]] = {}
_SCHEMA_SIZES_KEPT = 4096


_UNKNOWN: object = object()  # a model whose price is not looked up yet
_FRAMING = 16  # characters a message or a tool costs besides its text (role, ids, quotes)


class BudgetGate:
    """One agent's side of its tree's ledger: its open reservations, and their events.

    Args:
        ledger: The ledger the agent reserves against.
        ctx: The agent's context (where reservations and settlements are logged).
    """

    __slots__ = (
        "_counted",
        "_priced",
        "_rates",
        "_run_cost",
        "_tools",
        "_unpriced",
        "ctx",
        "ledger",
        "open",
    )

    def __init__(self, ledger: Ledger, ctx: AgentContext) -> None:
        self.ledger = ledger
        self.ctx = ctx
        # (run, step) of each request in flight: what it reserved, its model's name and rates,
        # and its hold in the store of a shared budget (None when nothing is shared)
        self.open: dict[
            tuple[str, int], tuple[tuple[int, int, int, int], str, Rates | None, str | None]
        ] = {}
        self._rates = ledger.rates  # by model name, looked up once for the tree
        self._priced: tuple[str, Rates | None] = ("", None)  # the last model name and its rates
        self._tools: tuple[object, int] | None = None  # the tools last sent, and their size
        # How many messages the last request had, its last one, and their size in characters
        self._counted: tuple[int, object, int] = (0, None, 0)
        self._run_cost: tuple[str | None, int] = (None, 0)  # the latest run, its nano-dollars
        self._unpriced = False  # a model of this agent has no price: its cost is unknown

    def priced(self, usage: Usage, run_id: str) -> Usage:
        """``usage`` of run ``run_id``, with what its priced replies cost (None: none priced)."""
        cost_run, nano = self._run_cost
        if cost_run != run_id or self._unpriced:
            return usage
        cost = Decimal(nano) / NANO
        return usage_of(
            usage.requests, usage.input_tokens, usage.output_tokens, usage.tool_calls, cost
        )

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
            self._counted = (total, messages[total - 1], size)
            return size + _messages_size(messages, 0, 1)
        # Read whole (a new agent's first requests, mostly): one pass, the first message's
        # size kept apart.
        size = first = 0
        message: Message | None = None
        for message in messages:
            content = message.content
            size += (len(content) if type(content) is str else content_size(content)) + _FRAMING
            if isinstance(message, AssistantMessage) and message.tool_calls:
                for call in message.tool_calls:
                    size += len(call.name) + len(str(call.arguments)) + _FRAMING
            if not first:
                first = size
        self._counted = (total, message, size - first)
        return size

    def _price(self, model_name: str) -> Rates | None:
        rates = self._rates.get(model_name, _UNKNOWN)
        if rates is _UNKNOWN:  # a get, not a KeyError: a new agent's first request misses
            price = price_of(model_name, self.ledger.prices)
            rates = self._rates[model_name] = None if price is None else rates_of(price)
        return rates  # type: ignore[return-value]

    def reserve(
        self, model: Model, request: ModelRequest, run_id: str, step: int, header: dict[str, Any]
    ) -> ModelRequest | RunError:
        """Reserve ``request``'s worst case: the request to send, or why the run must end.

        The reservation goes into ``header`` (the request's ``request_header`` data, not yet
        logged) as ``budget``: the step logs it with the request, at no extra event.
        """
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
        name = model.name
        priced = self._priced  # an agent asks one model, mostly: its rates are kept at hand
        if priced[0] == name and name:
            price = priced[1]
        else:
            price = self._price(name)
            self._priced = (name, price)
        if price is not None:
            # Worst case: every input token written to a prompt cache, where that costs more.
            writes = input_tokens if price[3] > price[0] else 0
            nano = nano_at(price, input_tokens, output_tokens, 0, writes)
        else:
            self._unpriced = True
        if price is None and ledger.in_dollars:
            return RunFailedError(
                f"agent {self.ctx.agent_id!r}: its budget is in dollars and model "
                f"{name!r} has no known price; give it in Budget(prices={{...}}) or "
                "install genai-prices (pip install 'actors[prices]')"
            )
        amount = (1, input_tokens, output_tokens, nano)
        hold = None
        if ledger.stored:  # a shared budget: held in its store too, under a name of its own
            hold = f"{self.ctx.agent_id}/{run_id}/{step}/{secrets.token_hex(6)}"
            try:
                problem = ledger.reserve_held(amount, hold)
            except Exception as exc:
                failure = RunFailedError(
                    f"agent {self.ctx.agent_id!r}: its shared budget's store could not "
                    f"reserve this request ({type(exc).__name__}: {exc}); nothing was sent"
                )
                failure.__cause__ = exc
                return failure
        else:
            problem = ledger.reserve(amount)
        if problem is not None:
            return BudgetExceeded(f"agent {self.ctx.agent_id!r}: {problem}; nothing was sent")
        self.open[run_id, step] = (amount, name, price, hold)
        if self._run_cost[0] != run_id:
            self._run_cost = (run_id, 0)
        header["budget"] = {
            "requests": 1,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "nano_usd": nano,
        }
        if hold is not None:
            header["budget"]["hold"] = hold
        return request

    def settle(self, message: ModelReplied) -> dict[str, Any] | None:
        """The reply to a reserved request came (or its failure): settle what it reported.

        A failure reports nothing spent, so it releases the reservation. Returns what the log
        must say of it (a ``step_end``'s ``budget``, or `log_settled`'s), or None when the
        request reserved nothing.
        """
        entry = self.open.pop((message.run_id, message.step), None)
        if entry is None:
            return None
        reserved, model_name, reserved_price, hold = entry
        response = message.response
        if response is not None:
            usage = response.usage
            nano = 0
            replied = response.model_name
            if not replied or replied == model_name:  # priced as reserved: no look-up
                price = reserved_price
            else:
                price = self._price(replied)
                if price is None:
                    price = reserved_price
            if price is not None:
                nano = nano_at(
                    price,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cache_read_tokens,
                    usage.cache_write_tokens,
                )
                if message.run_id == self._run_cost[0]:  # a late reply's run has ended
                    self._run_cost = (message.run_id, self._run_cost[1] + nano)
            spent: tuple[int, int, int, int] = (
                usage.requests,
                usage.input_tokens,
                usage.output_tokens,
                nano,
            )
        else:
            spent = ZERO
        settled: dict[str, Any] = {
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
        }
        if hold is None:
            self.ledger.settle(reserved, spent)
            return settled
        settled["hold"] = hold
        if not self.ledger.settle_held(reserved, spent, hold):
            settled["stored"] = False  # a restore settles it in the store (see open_holds)
        return settled

    def log_settled(self, settled: dict[str, Any] | None, run_id: str, step: int) -> None:
        """Log a settlement that no ``step_end`` carries (a late reply, an unsent request)."""
        if settled is not None:
            self.ctx._record("budget_settled", {"run_id": run_id, "step": step, **settled})
