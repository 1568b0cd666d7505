"""How a compaction is planned: an agent's counts of its transcript, and the range to summarise.

`Compactor` keeps, per agent, the estimated tokens of each message of the transcript and the
positions where a range may end (before a turn, with no tool call open), both kept as messages
arrive, so that counting a request and planning a compaction cost sums and searches, not a
walk over the transcript. What compaction is: `actors.loop._compaction`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from actors._safe import exception_text
from actors.context._agent_context import AgentContext
from actors.context._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from actors.exceptions import AgentDefinitionError
from actors.loop._compaction import SUMMARY_PREFIX, TRIMMED, render_transcript
from actors.models._model import Model, ModelRequest, ModelSettings, ToolDefinition
from actors.models._tokens import (
    CHARS_PER_TOKEN,
    TokenCalibration,
    context_window_of,
    message_tokens,
    tools_tokens,
)

if TYPE_CHECKING:
    from actors.loop._agent import Agent

__all__ = ["Compactor", "Plan"]


@dataclass(frozen=True, slots=True)
class Plan:
    """One compaction: positions ``first..last`` give way to a summary; ``kept`` stay."""

    first: int
    last: int
    kept: tuple[int, ...]
    generation: tuple[int, int]  # (transcript length, generation) it was planned on
    tokens_before: int
    step: int  # the negative step number its reply comes back with
    covers: tuple[int, int]  # the seqs of the first and last summarised messages


class Compactor:
    """One agent's compaction: its window, its counts, and the plans it makes."""

    def __init__(self, spec: Agent[Any], model: Model, ctx: AgentContext) -> None:
        compaction = spec.compaction
        assert compaction is not None
        self.compaction = compaction
        window = spec.context_window or context_window_of(model)
        if window is None:
            raise AgentDefinitionError(
                f"agent {spec.name!r} has compaction, and no context window is known for its "
                f"model {getattr(model, 'name', model)!r}: give Agent(context_window=...)"
            )
        self.window = window
        self.limit = max(1, int(window * compaction.at))
        summarizer = compaction.summarizer
        self.summary_model: Model | None = None  # None: the agent's own model
        self.summary_prompt = compaction.prompt
        if summarizer is not None and callable(getattr(summarizer, "request", None)):
            self.summary_model = summarizer  # type: ignore[assignment]
        elif summarizer is not None:
            agent: Agent[Any] = summarizer  # type: ignore[assignment]
            if isinstance(agent.model, str) or agent.model is None:
                self.summary_model = None
            else:
                self.summary_model = agent.model
            instructions = agent.system_prompt or (
                agent.instructions if isinstance(agent.instructions, str) else None
            )
            if instructions:
                self.summary_prompt = instructions
        # The agent's own model is held to the window the agent states; another summarizer
        # to its own known window (or, unknown, the agent's).
        summary_window = None if self.summary_model is None else context_window_of(summarizer)
        self.summary_window = summary_window or window
        self.calibration = TokenCalibration()
        self.exact = getattr(model, "count_tokens", None) if _counts_exactly(model) else None
        self.last_estimate = 0  # the raw estimate of the request in flight (to calibrate)
        # Token estimates of the transcript's messages, by position, kept as it grows.
        self._sizes: list[int] = []
        self._total = 0
        self._origin: tuple[int, int] = (-1, -1)  # (log id, generation) the sizes are of
        # Where a range may end: the positions of user messages before which every tool call
        # has its result (a cut there parts no call from its result), kept as sizes are.
        self._starts: list[int] = []
        self._open: set[str] = set()  # tool calls without a result so far
        self._tools: tuple[Sequence[ToolDefinition], int] | None = None
        self._calibrate_from(ctx)

    def _calibrate_from(self, ctx: AgentContext) -> None:
        """A restored agent takes up the calibration its log records (estimate, then usage).

        Read from the log's records as they are kept (no `Event` is made for a long log).
        """
        reported = None
        for item in reversed(ctx._events):
            if isinstance(item, tuple):
                _, kind, data, _ = item
            else:
                kind, data = item.type, item.data
            if kind == "usage" and reported is None:
                reported = data.get("input_tokens")
            elif kind == "request_header" and "tokens" in data:
                if isinstance(reported, int):
                    self.calibration.observe(int(data["tokens"]), reported)
                return

    # -- counting ---------------------------------------------------------------------------

    def _transcript_tokens(self, ctx: AgentContext) -> int:
        messages = ctx._messages
        origin = (ctx._log_id, ctx._generation)
        sizes = self._sizes
        if origin != self._origin:
            sizes.clear()
            self._starts.clear()
            self._open.clear()
            self._origin = origin
            self._total = 0
        if len(sizes) < len(messages):
            self._total += self._count(messages, len(sizes))
        return self._total

    def _count(self, messages: list[Message], start: int) -> int:
        """Size the messages from ``start`` on, noting where turns may be cut; their total."""
        sizes, starts, open_calls = self._sizes, self._starts, self._open
        total = 0
        for position in range(start, len(messages)):
            message = messages[position]
            size = message_tokens(message)
            sizes.append(size)
            total += size
            kind = type(message)
            if kind is AssistantMessage:
                for call in message.tool_calls:  # type: ignore[union-attr]
                    open_calls.add(call.id)
            elif kind is ToolResultMessage:
                open_calls.discard(message.tool_call_id)  # type: ignore[union-attr]
            elif isinstance(message, UserMessage) and not open_calls:
                starts.append(position)
        return total

    def _tools_tokens(self, tools: Sequence[ToolDefinition]) -> int:
        cached = self._tools
        if cached is None or cached[0] is not tools:
            cached = self._tools = (tools, tools_tokens(tools))
        return cached[1]

    def estimate(
        self, ctx: AgentContext, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> int:
        """The raw (uncalibrated) estimate of a request of ``messages`` and ``tools``."""
        origin = getattr(messages, "origin", None)
        if origin is not None and origin[:2] == (ctx._log_id, ctx._generation):
            total = self._transcript_tokens(ctx)
            overlay = ctx.system_prompt_overlay
            if overlay:
                total += len(overlay) // CHARS_PER_TOKEN
        else:  # a history processor's list: counted as it is
            total = sum(message_tokens(m) for m in messages)
        return total + self._tools_tokens(tools)

    def count(self, ctx: AgentContext, request: ModelRequest) -> int:
        """The calibrated tokens of ``request`` (exact when the model counts exactly)."""
        if self.exact is not None:
            self.last_estimate = int(self.exact(request))
            return self.last_estimate
        raw = self.estimate(ctx, request.messages, request.tools)
        self.last_estimate = raw
        return self.calibration.apply(raw)

    def observe(self, reported: int) -> None:
        """A reply reported ``reported`` input tokens for the request just counted."""
        if self.exact is None and self.last_estimate:
            self.calibration.observe(self.last_estimate, reported)

    def overflowed(self, ctx: AgentContext, request_tokens: int) -> None:
        """The provider refused a request as too long: count more, so the next one compacts."""
        if self.exact is None and self.last_estimate:
            needed = (self.window + 1) / self.last_estimate
            self.calibration.ratio = min(4.0, max(self.calibration.ratio * 1.25, needed))

    # -- planning ---------------------------------------------------------------------------

    def plan(self, ctx: AgentContext, tokens: int, step: int) -> Plan | None:
        """What to summarise now, or None when nothing can be (only what must stay is left)."""
        messages = ctx._messages
        size = len(messages)
        head = 1 if size and isinstance(messages[0], SystemMessage) else 0
        self._transcript_tokens(ctx)  # sizes and cut points by position
        pinned = self._pinned(ctx)
        budget = self._summary_budget()
        starts = [n for n in self._starts if n > head]
        for keep in range(self.compaction.keep_last_turns, 0, -1):
            if len(starts) < keep:
                continue
            end = starts[-keep]  # the first position that stays
            if pinned:
                plan = self._range(ctx, messages, head, end, pinned, budget, tokens, step)
            else:
                plan = self._quick_range(ctx, head, end, starts, budget, tokens, step)
            if plan is not None:
                return plan
        return None

    def _quick_range(
        self,
        ctx: AgentContext,
        head: int,
        end: int,
        starts: list[int],
        budget: int,
        tokens: int,
        step: int,
    ) -> Plan | None:
        """`_range` when nothing is pinned: sums and searches instead of a walk."""
        ratio = self.calibration.ratio
        sums = list(accumulate(self._sizes[head:end]))
        fits = bisect_right(sums, budget / ratio)  # how many messages one request carries
        # The range ends before the latest turn that starts within what fits; with none (a
        # turn longer than a request carries), before the second turn: the first, cut short.
        at = bisect_right(starts, head + fits)
        cut = starts[at - 1] if at and starts[at - 1] > head else None
        if cut is None:
            later = [n for n in starts[at:] if n > head]
            cut = later[0] if later else end
        cut = min(cut, end)
        last = cut - 1
        if last < head:
            return None
        seqs = ctx._seqs
        return Plan(
            first=head,
            last=last,
            kept=(),
            generation=(len(ctx._messages), ctx._generation),
            tokens_before=tokens,
            step=step,
            covers=(seqs[head], seqs[last]),
        )

    def _summary_budget(self) -> int:
        """How many tokens of transcript one summarizer request may carry."""
        window = self.summary_window
        prompt = len(self.summary_prompt) // CHARS_PER_TOKEN + 16
        # Room for the reply: what it may take, but never more than a quarter of the window.
        reply = min(self.compaction.summary_max_tokens or window // 8, window // 4)
        return max(256, int(window * self.compaction.at) - prompt - reply)

    def _range(
        self,
        ctx: AgentContext,
        messages: list[Message],
        head: int,
        end: int,
        pinned: set[int],
        budget: int,
        tokens: int,
        step: int,
    ) -> Plan | None:
        """The plan for positions ``head..end-1``, cut to what one summary request may carry.

        A range ends before a turn begins (a user message), and only where every tool call in
        it has its results in it too. One turn that is more than a request may carry is
        summarised from its messages cut short.
        """
        first = head
        while first < end and first in pinned:
            first += 1
        if first >= end:
            return None
        sizes = self._sizes
        ratio = self.calibration.ratio
        used = 0
        over = False
        cuts: list[int] = []  # positions where the range may end, in order
        for position in range(first, end):
            if position > first and type(messages[position]) is UserMessage:
                cuts.append(position - 1)
                if over:
                    break
            if position not in pinned:
                used += int(sizes[position] * ratio)
                if used > budget and not over:
                    over = True
                    if cuts:
                        break
        else:
            cuts.append(end - 1)
        for last in reversed(cuts):
            if _closed(messages, first, last, pinned):
                kept = tuple(n for n in range(first + 1, last + 1) if n in pinned)
                if last - first + 1 == len(kept):
                    continue
                seqs = ctx._seqs
                return Plan(
                    first=first,
                    last=last,
                    kept=kept,
                    generation=(len(messages), ctx._generation),
                    tokens_before=tokens,
                    step=step,
                    covers=(seqs[first], seqs[last]),
                )
        return None

    def _pinned(self, ctx: AgentContext) -> set[int]:
        """The positions that must stay: pinned messages, with their tool calls or results."""
        pinned_seqs = ctx._pinned
        listed = ctx._metadata.get(self.compaction.pin_key)
        if not pinned_seqs and not listed:
            return set()
        seqs: set[int] = set(pinned_seqs)
        call_ids: set[str] = set()
        if isinstance(listed, list):
            for item in listed:
                if isinstance(item, int) and not isinstance(item, bool):
                    seqs.add(item)
                elif isinstance(item, str):
                    call_ids.add(item)
        messages = ctx._messages
        positions = {n for n, seq in enumerate(ctx._seqs) if seq in seqs}
        # A pinned call keeps its results, and a pinned result keeps its call (and siblings).
        for n in positions:
            message = messages[n]
            if isinstance(message, AssistantMessage):
                call_ids.update(c.id for c in message.tool_calls)
            elif isinstance(message, ToolResultMessage):
                call_ids.add(message.tool_call_id)
        if call_ids:
            for n, message in enumerate(messages):
                if isinstance(message, AssistantMessage) and any(
                    c.id in call_ids for c in message.tool_calls
                ):
                    positions.add(n)
                    call_ids.update(c.id for c in message.tool_calls)
            for n, message in enumerate(messages):
                if isinstance(message, ToolResultMessage) and message.tool_call_id in call_ids:
                    positions.add(n)
        return positions

    # -- the summary request ----------------------------------------------------------------

    def request(self, ctx: AgentContext, plan: Plan, cancellation: Any) -> ModelRequest:
        """The summarizer's request for ``plan``'s range."""
        messages = ctx._messages
        kept = set(plan.kept)
        summarised = [messages[n] for n in range(plan.first, plan.last + 1) if n not in kept]
        budget = self._summary_budget() * CHARS_PER_TOKEN
        text = render_transcript(summarised, budget)
        settings = ModelSettings()
        if self.compaction.summary_max_tokens is not None:
            settings["max_tokens"] = self.compaction.summary_max_tokens
        return ModelRequest(
            messages=(
                SystemMessage(content=self.summary_prompt),
                UserMessage(content=f"Summarise this transcript:\n\n{text}"),
            ),
            settings=settings,
            cancellation=cancellation,
            agent_id=ctx.agent_id,
        )

    def summary_message(self, text: str) -> UserMessage:
        """The message that stands in for a summarised range."""
        return UserMessage(content=SUMMARY_PREFIX + text.strip())

    def trim_message(self, plan: Plan, reason: str) -> UserMessage:
        """The note that stands in for a range the summarizer could not summarise."""
        count = plan.last - plan.first + 1 - len(plan.kept)
        return UserMessage(content=TRIMMED.format(count=count, reason=reason))

    def applied(self, ctx: AgentContext, plan: Plan, summary: Message) -> None:
        """Keep sizes and cut points in step with the transcript after ``plan``'s event."""
        sizes = self._sizes
        if plan.kept or self._origin[1] + 1 != ctx._generation or len(sizes) != plan.generation[0]:
            self._origin = (-1, -1)  # counted again from scratch at the next estimate
            return
        first, last = plan.first, plan.last
        removed = sum(sizes[first : last + 1])
        added = message_tokens(summary)
        sizes[first : last + 1] = [added]
        self._total += added - removed
        shift = last - first
        self._starts = [
            *[n for n in self._starts if n < first],
            first,  # the summary: a user message, and no call is open before it
            *[n - shift for n in self._starts if n > last],
        ]
        self._origin = (ctx._log_id, ctx._generation)

    def summarised_tokens(self, plan: Plan) -> int:
        """The estimated tokens of what ``plan`` summarises."""
        sizes = self._sizes
        return sum(sizes[plan.first : plan.last + 1]) - sum(sizes[k] for k in plan.kept)

    def failure_reason(self, error: BaseException | None, text: str | None) -> str:
        """Why a summary could not be used, for the log and the trim note."""
        if error is not None:
            return f"the summarizer failed: {exception_text(error)}"[:300]
        if not text:
            return "the summarizer returned no text"
        return "the summary was no shorter than what it summarised"


def _counts_exactly(model: Any) -> bool:
    """Whether ``model.count_tokens`` counts exactly (a tokenizer), not by estimate."""
    return bool(getattr(model, "counts_exactly", False)) and callable(
        getattr(model, "count_tokens", None)
    )


def _closed(messages: list[Message], first: int, last: int, pinned: set[int]) -> bool:
    """Whether every tool call summarised in ``first..last`` has its results there too."""
    open_calls: set[str] = set()
    for n in range(first, last + 1):
        if n in pinned:
            continue
        message = messages[n]
        if type(message) is AssistantMessage:
            open_calls.update(c.id for c in message.tool_calls)
        elif type(message) is ToolResultMessage:
            if message.tool_call_id not in open_calls:
                return False  # a result whose call is not summarised with it
            open_calls.discard(message.tool_call_id)
    if not open_calls:
        return True
    # A call whose result comes after the range parts them (one with no result at all does not).
    answered = {m.tool_call_id for m in messages[last + 1 :] if type(m) is ToolResultMessage}
    return not (open_calls & answered)
