"""`AgentLoop`'s part that compacts the transcript before a request would not fit.

What compaction is and how a plan is made are in `actors.loop._compaction`; this part runs it
in the loop: it counts each request, sends the summary request as an effect, logs the
``compacted`` event when the summary is back, and compacts once more on a provider's "context
too long" refusal.
"""

from __future__ import annotations

from typing import Any

from actors.context._messages import Message
from actors.exceptions import ContextWindowExceeded
from actors.loop._compaction import MAX_ROUNDS, is_context_too_long
from actors.loop._compactor import Compactor, Plan
from actors.loop._state import _LoopCore, _Run
from actors.loop._types import CallModel, Effect, ModelReplied
from actors.models._model import ModelRequest
from actors.models._tokens import message_tokens

__all__ = ["CompactionMixin"]


class CompactionMixin(_LoopCore):
    """`AgentLoop`'s part that compacts the transcript before a request would not fit."""

    # Set on an agent with compaction only: an attribute more on every loop would cost each
    # idle agent a kilobyte (its instance dict outgrows the shared-key form).
    _compactor: Compactor | None = None

    def _fit(self, run: _Run, request: ModelRequest) -> list[Effect] | None:
        """None when ``request`` may be sent; else the effects that compact (or fail) first."""
        compactor = self._compactor
        assert compactor is not None
        ctx = self.ctx
        tokens = compactor.count(ctx, request)
        forced = run.overflowed and not run.compactions  # the provider said it is too long
        if tokens <= compactor.limit and not forced:
            run.compactions = 0
            return None
        if run.compactions < MAX_ROUNDS:
            plan = compactor.plan(ctx, tokens, -(ctx.event_count + 1))
            if plan is not None:
                run.compacting = plan
                run.awaiting_model = True
                self.log.info(
                    "compacting",
                    first=plan.first,
                    last=plan.last,
                    tokens=tokens,
                    limit=compactor.limit,
                )
                summary = compactor.request(ctx, plan, run.token)
                return [
                    CallModel(
                        run.run_id,
                        plan.step,
                        summary,
                        self.spec.model_timeout,
                        compactor.summary_model,
                    )
                ]
        if tokens <= compactor.window and not forced:
            run.compactions = 0
            return None  # past `at`, within the window: what must stay in view is sent
        error = ContextWindowExceeded(
            f"agent {ctx.agent_id!r}: the next request needs about {tokens} tokens and the "
            f"context window is {compactor.window}; compaction cannot shorten it further (what "
            "stays in view: the system message, pinned messages and the current turn). Raise "
            "the window, pin less, or keep fewer turns"
        )
        return self._fail(error, reason="limit")

    def _on_summary(self, message: ModelReplied) -> list[Effect]:
        """The summarizer answered (or failed): log the ``compacted`` event, then go on."""
        run = self._run
        plan: Plan | None = run.compacting if run is not None else None
        if run is None or plan is None or message.run_id != run.run_id or message.step != plan.step:
            self.log.debug("late summary discarded", step=message.step)
            return []
        run.compacting = None
        run.awaiting_model = False
        compactor = self._compactor
        assert compactor is not None
        ctx = self.ctx
        response = message.response
        if response is not None:
            ctx._add_usage(response.usage)
        if (len(ctx._messages), ctx._generation) != plan.generation:
            return self._next_step()  # the transcript moved meanwhile: plan again
        text = response.message.content if response is not None else None
        model = compactor.summary_model or self.model
        info: dict[str, Any] = {
            "run_id": run.run_id,
            "summarizer": model.name,
            "covers": list(plan.covers),
            "tokens_before": plan.tokens_before,
            "limit": compactor.limit,
            "window": compactor.window,
        }
        summary: Message | None = None
        if text and text.strip():
            summary = compactor.summary_message(text)
            if message_tokens(summary) >= compactor.summarised_tokens(plan):
                summary = None
        if summary is None:
            reason = compactor.failure_reason(message.error, text)
            summary = compactor.trim_message(plan, reason)
            info["fallback"] = "trim"
            info["reason"] = reason
            self.log.warning("compaction fell back to a trim", reason=reason)
        ctx.compact(plan.first, plan.last, summary, kept=plan.kept, info=info)
        compactor.applied(ctx, plan, summary)
        run.compactions += 1
        return self._next_step()

    def _on_overflow(
        self, run: _Run, error: BaseException, settled: dict[str, Any] | None = None
    ) -> list[Effect] | None:
        """The provider refused the step as too long: compact and try once more, or None.

        ``settled`` is the step's budget settlement, which its ``step_end`` carries.
        """
        compactor = self._compactor
        if compactor is None or run.overflowed or not is_context_too_long(error):
            return None
        run.overflowed = True
        ended: dict[str, Any] = {"step": run.step, "error": type(error).__name__}
        if settled is not None:
            ended["budget"] = settled
        self.ctx._record("step_end", ended)
        self.log.warning("the provider refused the request as too long; compacting")
        compactor.overflowed(self.ctx, compactor.last_estimate)
        return self._next_step()
