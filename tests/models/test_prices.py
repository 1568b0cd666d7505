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
