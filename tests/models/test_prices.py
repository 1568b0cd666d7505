"""Prices: a user's table first, then genai-prices when it is installed; integer nano-dollars."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from actors import Price
from actors.models import _prices
from actors.models._prices import nano_cost, price_of

MINI = Price(input=Decimal("0.15"), output=Decimal("0.60"))


def test_the_table_wins_and_names_match_with_or_without_the_provider() -> None:
    table = {"gpt-4o-mini": MINI}
    assert price_of("openai:gpt-4o-mini", table) == MINI
    assert price_of("gpt-4o-mini", table) == MINI
    assert price_of("openai:gpt-4o", table) is None or "genai_prices" in sys.modules


def test_costs_are_whole_nano_dollars_rounded_up() -> None:
    assert nano_cost(MINI, 1000, 500) == 450_000  # $0.00045
    assert nano_cost(Price(input=Decimal("0.15"), output=Decimal(0)), 1, 0) == 150
    tiny = Price(input=Decimal("0.0001"), output=Decimal(0))  # 0.1 nano-dollars a token
    assert nano_cost(tiny, 1, 0) == 1
    assert nano_cost(tiny, 10, 0) == 1
    assert nano_cost(tiny, 11, 0) == 2
    assert nano_cost(MINI, 0, 0) == 0


@dataclass
class _Calculation:
    total_price: Decimal


def _fake_genai_prices() -> types.ModuleType:
    module = types.ModuleType("genai_prices")

    class Usage:
        def __init__(self, input_tokens: int, output_tokens: int) -> None:
            self.input_tokens, self.output_tokens = input_tokens, output_tokens

    def calc_price(usage: Any, model_ref: str, *, provider_id: str | None = None) -> Any:
        if model_ref != "claude-x":
            raise LookupError(f"Unable to find model with {model_ref=!r}")
        assert provider_id == "anthropic"
        per = Decimal(3) * usage.input_tokens + Decimal(15) * usage.output_tokens
        return _Calculation(per / 1_000_000)

    module.Usage = Usage  # type: ignore[attr-defined]
    module.calc_price = calc_price  # type: ignore[attr-defined]
    return module


def test_genai_prices_is_asked_for_a_model_the_table_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", _fake_genai_prices())
    _prices._known_price.cache_clear()
    try:
        assert price_of("anthropic:claude-x") == Price(input=Decimal(3), output=Decimal(15))
        assert price_of("anthropic:unknown") is None
        assert price_of("anthropic:claude-x", {"claude-x": MINI}) == MINI
    finally:
        _prices._known_price.cache_clear()


def test_without_genai_prices_an_unknown_model_has_no_price(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # an import of it fails
    _prices._known_price.cache_clear()
    try:
        assert price_of("openai:gpt-4o-mini") is None
    finally:
        _prices._known_price.cache_clear()


def test_genai_prices_when_installed_knows_a_common_model() -> None:
    pytest.importorskip("genai_prices")
    _prices._known_price.cache_clear()
    price = price_of("openai:gpt-4o-mini")
    assert price is not None
    assert price.input > 0
    assert price.output > price.input


def test_cached_input_is_priced_at_the_cache_rates() -> None:
    price = Price(
        input=Decimal(3), output=Decimal(15), cache_read=Decimal("0.3"), cache_write=Decimal("3.75")
    )
    # 1,000 input tokens: 800 read from the cache, 100 written to it, 100 plain.
    assert price.cost(1000, 10, cache_read_tokens=800, cache_write_tokens=100) == Decimal(
        "0.001065"
    )
    assert nano_cost(price, 1000, 10, 800, 100) == 1_065_000
    assert nano_cost(price, 1000, 10) == 3_150_000  # nothing cached: all at the input rate
    # Without cache rates, cached tokens cost what input costs.
    assert nano_cost(MINI, 1000, 500, 800, 100) == nano_cost(MINI, 1000, 500)
    # A report with more cached than input tokens never prices below zero.
    assert nano_cost(price, 10, 0, 800, 0) == 3_000  # 10 tokens at $0.3 a million


def test_genai_prices_gives_the_cache_rates_it_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("genai_prices")

    class Usage:
        def __init__(self, **tokens: int) -> None:
            self.tokens = tokens

    def calc_price(usage: Any, model_ref: str, *, provider_id: str | None = None) -> Any:
        t = usage.tokens
        read, write = t.get("cache_read_tokens", 0), t.get("cache_write_tokens", 0)
        plain = t.get("input_tokens", 0) - read - write
        total = Decimal(3) * plain + Decimal("0.3") * read + Decimal("3.75") * write
        return _Calculation((total + Decimal(15) * t.get("output_tokens", 0)) / 1_000_000)

    module.Usage = Usage  # type: ignore[attr-defined]
    module.calc_price = calc_price  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "genai_prices", module)
    _prices._known_price.cache_clear()
    try:
        assert price_of("anthropic:claude-y") == Price(
            input=Decimal(3),
            output=Decimal(15),
            cache_read=Decimal("0.3"),
            cache_write=Decimal("3.75"),
        )
    finally:
        _prices._known_price.cache_clear()
