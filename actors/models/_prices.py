"""`Price`: what a model's tokens cost, from a user's table or from ``genai-prices``.

A budget in dollars needs a price for every model its tree asks. The user's table wins; a
model it does not name is looked up in ``genai-prices`` (the optional ``actors[prices]``
extra) when that is installed, and nothing is ever fetched over the network for it. Amounts
are kept in whole nano-dollars (1e-9 USD), rounded up, so a ledger adds integers exactly.

Input tokens a provider read from its prompt cache, or wrote to it, are priced at the cache
rates where the price has them (`Price.cache_read`, `Price.cache_write`), at the input rate
otherwise.
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

    Attributes:
        input: Per million input tokens.
        output: Per million output tokens.
        cache_read: Per million input tokens read from the provider's prompt cache (OpenAI
            and Anthropic bill them at a tenth to a half of ``input``); None: ``input``.
        cache_write: Per million input tokens written to the prompt cache (Anthropic bills
            them at 1.25 times ``input``); None: ``input``.

    Example:
        >>> Price(input=Decimal("0.15"), output=Decimal("0.60")).cost(1000, 500)
        Decimal('0.00045')
        >>> Price(input=Decimal(3), output=Decimal(15), cache_read=Decimal("0.3")).cost(
        ...     1000, 0, cache_read_tokens=800
        ... )
        Decimal('0.00084')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)
    _rates: tuple[int, int, int, int] = PrivateAttr(default=(0, 0, 0, 0))

    def model_post_init(self, context: Any, /) -> None:
        # Integer rates, once: every request of a budgeted tree is priced without Decimal.
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        self._rates = (
            math.ceil(self.input * _FEMTO),
            math.ceil(self.output * _FEMTO),
            math.ceil(read * _FEMTO),
            math.ceil(write * _FEMTO),
        )

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal:
        """Dollars for ``input_tokens`` in (of which the cached ones) and ``output_tokens`` out.

        ``input_tokens`` counts every input token, as `Usage` does: the cache reads and writes
        among them are priced at their own rates, the rest at ``input``.
        """
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        plain = max(0, input_tokens - cache_read_tokens - cache_write_tokens)
        total = (
            self.input * plain
            + read * cache_read_tokens
            + write * cache_write_tokens
            + self.output * output_tokens
        )
        return total / 1_000_000


def nano_cost(
    price: Price,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> int:
    """What ``price`` charges for the tokens, in nano-dollars, rounded up (never under)."""
    return nano_at(
        rates_of(price), input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
    )


Rates = tuple[int, int, int, int]
"""A price as integers: femto-dollars per million tokens in, out, read from and written to the
prompt cache (rounded up)."""

_FEMTO = 10**15
_FEMTO_PER_NANO_MTOK = 10**6 * 10**6  # femto-dollars per nano-dollar, times tokens per Mtok


def rates_of(price: Price) -> Rates:
    """``price`` as integer rates: every request of a budgeted tree is priced without Decimal."""
    # Read where pydantic keeps private attributes: its __getattr__ for them is slower.
    private = price.__pydantic_private__
    return private["_rates"] if private else price._rates


def nano_at(
    rates: Rates,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> int:
    """What the tokens cost at ``rates``, in nano-dollars, rounded up.

    ``input_tokens`` counts every input token; the cache reads and writes among them are
    priced at the cache rates.
    """
    femto = input_tokens * rates[0] + output_tokens * rates[1]
    if cache_read_tokens or cache_write_tokens:
        cached = min(input_tokens, cache_read_tokens + cache_write_tokens)
        read = min(cache_read_tokens, cached)
        femto += read * (rates[2] - rates[0]) + (cached - read) * (rates[3] - rates[0])
    return -(-femto // _FEMTO_PER_NANO_MTOK)


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

    def per_million(**tokens: int) -> Decimal:
        usage = module.Usage(**tokens)
        return Decimal(module.calc_price(usage, model, provider_id=provider).total_price)

    try:
        per_input = per_million(input_tokens=million, output_tokens=0)
        per_output = per_million(input_tokens=0, output_tokens=million)
    except LookupError:  # genai-prices does not know the model (or the provider)
        return None
    cache: dict[str, Decimal] = {}
    for field, tokens in (
        ("cache_read", "cache_read_tokens"),
        ("cache_write", "cache_write_tokens"),
    ):
        # A million input tokens, all of them cache reads (or writes): the cache rate.
        try:
            cache[field] = per_million(input_tokens=million, **{tokens: million})
        except (LookupError, TypeError, ValueError):  # an older genai-prices: no cache rates
            continue
    return Price(input=per_input, output=per_output, **cache)
