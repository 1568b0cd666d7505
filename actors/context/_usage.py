"""`Usage`: requests, input and output tokens and tool calls, summed over a run or a tree."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from actors.context._unchecked import SetFields, unchecked


def _zero(count: int) -> bool:
    return count == 0


class Usage(BaseModel):
    """What a run consumed: model requests, tokens and tool calls, and what they cost.

    Usages add up with ``+``, so a run's usage is the sum of its steps' and a tree's is the sum
    of its agents'. ``cost`` is the requests' price in US dollars where a budget priced them
    (see `actors.Budget`), and None where nothing did; it is left out of dumps when None.

    ``input_tokens`` counts every input token, cached or not. ``cache_read_tokens`` and
    ``cache_write_tokens`` say how many of them the provider read from its prompt cache
    (billed at a fraction of the input price) and wrote to it (billed at a premium, by
    Anthropic); they are the OpenTelemetry GenAI conventions'
    ``gen_ai.usage.cache_read.input_tokens`` and ``gen_ai.usage.cache_creation.input_tokens``.
    Both are left out of dumps (and of the repr) when zero, so a usage without caching dumps
    as it always did.

    Example:
        >>> Usage(requests=1, input_tokens=10) + Usage(requests=1, output_tokens=3)
        Usage(requests=2, input_tokens=10, output_tokens=3, tool_calls=0)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: NonNegativeInt = 0
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    tool_calls: NonNegativeInt = 0
    cost: Decimal | None = Field(default=None, ge=0, exclude_if=lambda cost: cost is None)
    cache_read_tokens: NonNegativeInt = Field(default=0, exclude_if=_zero)
    cache_write_tokens: NonNegativeInt = Field(default=0, exclude_if=_zero)

    def __add__(self, other: object) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost, more = self.cost, other.cost
        if more is not None:
            cost = more if cost is None else cost + more
        # Both sides are valid usages, so the sum is too: skip validation on this hot path.
        return usage_of(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.tool_calls + other.tool_calls,
            cost,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __repr__(self) -> str:
        priced = "" if self.cost is None else f", cost={self.cost!r}"
        cached = ""
        if self.cache_read_tokens:
            cached += f", cache_read_tokens={self.cache_read_tokens}"
        if self.cache_write_tokens:
            cached += f", cache_write_tokens={self.cache_write_tokens}"
        return (
            f"Usage(requests={self.requests}, input_tokens={self.input_tokens}, "
            f"output_tokens={self.output_tokens}, tool_calls={self.tool_calls}{cached}{priced})"
        )


_FIELDS = SetFields(Usage.model_fields)


def usage_of(
    requests: int,
    input_tokens: int,
    output_tokens: int,
    tool_calls: int,
    cost: Decimal | None = None,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Usage:
    """A `Usage` from counts the caller knows are valid (sums, differences): no validation."""
    values = {
        "requests": requests,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tool_calls": tool_calls,
        "cost": cost,
        "cache_read_tokens": cache_read_tokens,
        "cache_write_tokens": cache_write_tokens,
    }
    return unchecked(Usage, values, _FIELDS)
