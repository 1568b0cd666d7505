"""The agent loop's final answer: checked against the output type, then by the validators.

A text answer (or, for a tools agent with an output type, a ``final_result`` call) that matches
the output type goes through the agent's output validators one at a time, each as a
`CallTool` effect of its own (see `_validation`). A refusal (a schema mismatch, or a validator's
`ModelRetry`) goes back to the model and counts against ``output_retries``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from actors.context._cancel import CancellationToken
from actors.context._messages import AssistantMessage, ToolCall, UserMessage
from actors.exceptions import OutputValidationError, RunFailedError
from actors.loop._output import FINAL_RESULT_TOOL
from actors.loop._state import _LoopCore, _Validation
from actors.loop._tools import describe_validation_error
from actors.loop._types import CallTool, Effect, ToolOutcome
from actors.loop._validation import Verdict

__all__ = ["AnswerMixin"]


class AnswerMixin(_LoopCore):
    """Judging final answers (part of `AgentLoop`)."""

    def _final_text(self, reply: AssistantMessage) -> list[Effect]:
        """The model answered in text: the answer, or a note to give it properly."""
        if self._output is None:
            return self._accept(reply.content, None)
        if self._use_output_tool:
            problem = f"Please give the final answer by calling the {FINAL_RESULT_TOOL!r} tool."
        else:
            try:
                output = self._output.from_text(reply.content)
            except ValidationError as exc:
                problem = (
                    "The answer did not match the required output schema: "
                    f"{describe_validation_error(exc)}. Reply with valid JSON only."
                )
            else:
                return self._accept(output, None)
        return self._send_back(problem)

    def _send_back(self, problem: str) -> list[Effect]:
        """A text answer was refused: tell the model why, or end the run past the budget."""
        run = self._run
        assert run is not None
        run.output_retries += 1
        if run.output_retries > self.spec.output_retries:
            return self._fail(
                OutputValidationError(
                    f"agent {self.ctx.agent_id!r}: the final answer never matched the output "
                    f"type after {self.spec.output_retries} retries: {problem}"
                ),
                reason="error",
            )
        self.ctx._add_message(UserMessage(content=problem), source="output_retry")
        return self._next_step()

    def _accept(self, output: Any, call_id: str | None) -> list[Effect]:
        """A final answer that matches the output type: through the validators, then done.

        ``call_id`` is the final_result call that gave it, or None for a text answer.
        """
        run = self._run
        assert run is not None
        if self._validators:
            return [self._validate(output, 0, call_id)]
        if call_id is None:
            return self._complete(output)
        run.final = (output,)
        slot = run.calls[call_id]
        slot.outcome, slot.state = ToolOutcome("Final result processed."), "done"
        return []

    def _validate(self, output: Any, index: int, call_id: str | None) -> CallTool:
        """Run output validator ``index`` on ``output``, as a tool call of its own."""
        run = self._run
        assert run is not None
        if call_id is not None:
            run.calls[call_id].state = "running"  # the step settles once the answer is judged
        effect_id = f"{run.run_id}-output-{run.step}-{index}"
        run.validation = _Validation(output, index, effect_id, call_id)
        token = CancellationToken()
        run.token.on_cancel(token.cancel)
        call = ToolCall(id=effect_id, name=FINAL_RESULT_TOOL)
        ctx = self.ctx.run_context(
            call,
            tool_context=self.tool_view,  # read-only, as tools get it
            metadata=self.ctx.metadata_snapshot(),
            retry=run.output_retries + run.retries.get(FINAL_RESULT_TOOL, 0),
            timeout=self.spec.tool_timeout,
            cancellation=token,
        )
        tool = self._validators[index]
        return CallTool(run.run_id, call, tool, {"output": output}, ctx, self.spec.tool_timeout)

    def _on_verdict(self, outcome: ToolOutcome) -> list[Effect]:
        run = self._run
        assert run is not None
        assert run.validation is not None
        judged, run.validation = run.validation, None
        verdict = outcome.output if isinstance(outcome.output, Verdict) else None
        if verdict is None or verdict.error is not None:  # it raised, or timed out
            name = self._validators[judged.index].name
            failure = RunFailedError(
                f"agent {self.ctx.agent_id!r}: output validator {name!r} failed: {outcome.content}"
            )
            failure.__cause__ = verdict.error if verdict is not None else None
            return self._fail(failure, reason="error")
        if verdict.retry is not None:
            if judged.call_id is None:
                return self._send_back(verdict.retry)
            return self._refuse_final(judged.call_id, verdict.retry)
        if judged.index + 1 < len(self._validators):
            return [self._validate(verdict.output, judged.index + 1, judged.call_id)]
        if judged.call_id is None:
            return self._complete(verdict.output)
        run.final = (verdict.output,)
        slot = run.calls[judged.call_id]
        slot.outcome, slot.state = ToolOutcome("Final result processed."), "done"
        return self._settle()

    def _refuse_final(self, call_id: str, message: str) -> list[Effect]:
        """A validator sent a final_result call back: its result says why (output budget)."""
        run = self._run
        assert run is not None
        count = run.retries[FINAL_RESULT_TOOL] = run.retries.get(FINAL_RESULT_TOOL, 0) + 1
        if count > self.spec.output_retries and run.failure is None:
            # Ends the run once the step's results are in: the transcript stays well formed.
            run.failure = OutputValidationError(
                f"agent {self.ctx.agent_id!r}: the final answer was refused by an output "
                f"validator after {self.spec.output_retries} retries: {message}"
            )
        slot = run.calls[call_id]
        slot.outcome, slot.state = ToolOutcome(message, True), "done"
        return self._settle()
