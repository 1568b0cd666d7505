from __future__ import annotations

import doctest
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import actors.context._usage
from actors import Usage

usages = st.builds(
    Usage,
    requests=st.integers(0, 100),
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    tool_calls=st.integers(0, 100),
)


def test_defaults_are_zero() -> None:
    assert Usage() == Usage(requests=0, input_tokens=0, output_tokens=0, tool_calls=0)


def test_usages_add_field_by_field() -> None:
    total = Usage(requests=1, input_tokens=10, tool_calls=2) + Usage(
        requests=2, input_tokens=5, output_tokens=7
    )
    assert total == Usage(requests=3, input_tokens=15, output_tokens=7, tool_calls=2)
    assert total.total_tokens == 22


def test_a_sum_copies_with_updates_like_any_usage() -> None:
    total = Usage(requests=1) + Usage(input_tokens=2)
    assert total.model_copy(update={"tool_calls": 3}) == Usage(
        requests=1, input_tokens=2, tool_calls=3
    )


def test_sum_with_a_usage_start() -> None:
    parts = [Usage(requests=1), Usage(output_tokens=4), Usage(tool_calls=1)]
    assert sum(parts, Usage()) == Usage(requests=1, output_tokens=4, tool_calls=1)


def test_adding_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Usage() + 1  # type: ignore[operator]


def test_usage_is_frozen() -> None:
    with pytest.raises(ValidationError, match="frozen"):
        Usage().requests = 3  # type: ignore[misc]


@pytest.mark.parametrize("field", ["requests", "input_tokens", "output_tokens", "tool_calls"])
def test_negative_counts_are_rejected(field: str) -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Usage(**{field: -1})


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Usage(price=3)  # type: ignore[call-arg]


def test_costs_add_where_known_and_stay_out_of_dumps_where_not() -> None:
    priced = Usage(requests=1, cost=Decimal("0.25"))
    assert (priced + Usage(requests=1)).cost == Decimal("0.25")
    assert (priced + priced).cost == Decimal("0.5")
    assert (Usage() + Usage()).cost is None
    assert "cost" not in Usage(requests=1).model_dump()
    assert priced.model_dump(mode="json")["cost"] == "0.25"


@settings(max_examples=50, deadline=None)
@given(usages, usages, usages)
def test_addition_is_associative_and_commutative(a: Usage, b: Usage, c: Usage) -> None:
    assert (a + b) + c == a + (b + c)
    assert a + b == b + a
    assert a + Usage() == a


def test_docstring_examples() -> None:
    result = doctest.testmod(actors.context._usage, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_cache_counts_add_up_and_stay_out_of_dumps_when_zero() -> None:
    plain = Usage(requests=1, input_tokens=10, output_tokens=2)
    # A usage without caching dumps as it always did: old logs and scripted runs unchanged.
    assert plain.model_dump() == {
        "requests": 1,
        "input_tokens": 10,
        "output_tokens": 2,
        "tool_calls": 0,
    }
    assert repr(plain) == "Usage(requests=1, input_tokens=10, output_tokens=2, tool_calls=0)"
    cached = Usage(requests=1, input_tokens=100, cache_read_tokens=80, cache_write_tokens=5)
    total = plain + cached + cached
    assert total.cache_read_tokens == 160
    assert total.cache_write_tokens == 10
    assert total.input_tokens == 210
    assert total.model_dump()["cache_read_tokens"] == 160
    assert Usage.model_validate_json(total.model_dump_json()) == total
    assert "cache_read_tokens=160, cache_write_tokens=10" in repr(total)
