"""`Price`: what a model's tokens cost, from a user's table or from ``genai-prices``.

A budget in dollars needs a price for every model its tree asks. The user's table wins; a
model it does not name is looked up in ``genai-prices`` (the optional ``actors[prices]``
extra) when that is installed, and nothing is ever fetched over the network for it. Amounts
are kept in whole nano-dollars (1e-9 USD), rounded up, so a ledger adds integers exactly.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

__all__ = ["NANO", "Price", "Rates", "nano_at", "nano_cost", "price_of", "rates_of"]

NANO = 10**9
"""Nano-dollars in a dollar: a ledger counts money in whole nano-dollars."""


class Price(BaseModel):
    """What one model charges, in US dollars per million tokens.

    Example:
        >>> Price(input=Decimal("0.15"), output=Decimal("0.60")).cost(1000, 500)
        Decimal('0.00045')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    _rates: tuple[int, int] = PrivateAttr(default=(0, 0))

    def model_post_init(self, context: Any, /) -> None:
        # Integer rates, once: every request of a budgeted tree is priced without Decimal.
        self._rates = (math.ceil(self.input * _FEMTO), math.ceil(self.output * _FEMTO))

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """Dollars for ``input_tokens`` in and ``output_tokens`` out."""
        return (self.input * input_tokens + self.output * output_tokens) / 1_000_000


def nano_cost(price: Price, input_tokens: int, output_tokens: int) -> int:
    """What ``price`` charges for the tokens, in nano-dollars, rounded up (never under)."""
    return nano_at(rates_of(price), input_tokens, output_tokens)


Rates = tuple[int, int]
"""A price as integers: femto-dollars per million tokens in and out (rounded up)."""

_FEMTO = 10**15
_FEMTO_PER_NANO_MTOK = 10**6 * 10**6  # femto-dollars per nano-dollar, times tokens per Mtok


def rates_of(price: Price) -> Rates:
    """``price`` as integer rates: every request of a budgeted tree is priced without Decimal."""
    # Read where pydantic keeps private attributes: its __getattr__ for them is slower.
    private = price.__pydantic_private__
    return private["_rates"] if private else price._rates


def nano_at(rates: Rates, input_tokens: int, output_tokens: int) -> int:
    """What the tokens cost at ``rates``, in nano-dollars, rounded up."""
    return -(-(input_tokens * rates[0] + output_tokens * rates[1]) // _FEMTO_PER_NANO_MTOK)


def price_of(model_name: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model_name``: from ``table``, else from ``genai-prices`` if installed.

    A name is tried as given (``"openai:gpt-4o-mini"``), then without its provider prefix
    (``"gpt-4o-mini"``), in the table first.
    """
    names = _names(model_name)
    if table:
        for name in names:
            if name in table:
                return table[name]
    return _known_price(model_name)


def _names(model_name: str) -> tuple[str, ...]:
    bare = model_name.split(":", 1)[1] if ":" in model_name else model_name
    return (model_name, bare) if bare != model_name else (model_name,)


@functools.lru_cache(maxsize=256)
def _known_price(model_name: str) -> Price | None:
    try:
        import genai_prices  # type: ignore[import-not-found,unused-ignore]  # optional extra
    except ImportError:
        return None
    provider, _, bare = model_name.rpartition(":")
    return _ask_genai_prices(genai_prices, bare, provider or None)


def _ask_genai_prices(module: Any, model: str, provider: str | None) -> Price | None:
    # One million tokens each way gives the per-million prices (tiers past that aside).
    million = 1_000_000
    try:
        per_input = module.calc_price(
            module.Usage(input_tokens=million, output_tokens=0), model, provider_id=provider
        )
        per_output = module.calc_price(
            module.Usage(input_tokens=0, output_tokens=million), model, provider_id=provider
        )
    except LookupError:  # genai-prices does not know the model (or the provider)
        return None
    return Price(input=Decimal(per_input.total_price), output=Decimal(per_output.total_price))
