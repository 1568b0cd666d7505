"""The agent loop's suspension: parked calls, open requests, answers and approvals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from actors.context._cancel import CancellationToken
from actors.context._json import JsonError, json_copy
from actors.context._messages import ToolCall
from actors.context._suspension import Answer, Request
from actors.context._usage import usage_of
from actors.exceptions import UnknownRequestError
from actors.loop._recovery import undelivered
from actors.loop._state import _Call, _LoopCore, _Run
from actors.loop._tools import describe_validation_error
from actors.loop._types import ApprovalDecided, Effect, Finish, ResumeChild, ResumeRun, ToolOutcome

__all__ = ["SuspensionMixin"]


class SuspensionMixin(_LoopCore):
    """Parking calls on requests and resuming them with answers (part of `AgentLoop`)."""

    def open_requests(self) -> tuple[Request, ...]:
        """Every open request of this agent and its descendants, with paths from here."""
        if self._run is None:
            return ()
        out: list[Request] = []
        for call in self._run.calls.values():
            if call.state != "parked":
                continue
            if call.request is not None:
                out.append(call.request)
            out.extend(call.child_requests)
        return tuple(out)

    def _park(self, slot: _Call, request: Request, *, approval: bool = False) -> None:
        """Park a call on a request of its own; it is logged when the step settles."""
        slot.state, slot.request, slot.outcome = "parked", request, None
        slot.approval, slot.unlogged = approval, True

    def _log_park(self, slot: _Call) -> None:
        ctx = self.ctx
        request = slot.request
        assert request is not None
        request_id = request.id or f"{ctx.agent_id}-req-{ctx.event_count}"
        if request_id in ctx.suspended:
            request_id = f"{request_id}-{ctx.event_count}"
        request = request.model_copy(
            update={"id": request_id, "agent_id": ctx.agent_id, "path": (ctx.agent_id,)}
        )
        ctx._record(
            "suspended",
            {
                "request": request.model_dump(mode="json"),
                "tool_call": slot.call.model_dump(mode="json"),
                "approval": slot.approval,
            },
        )
        slot.request, slot.unlogged = request, False

    def _on_approval(self, message: ApprovalDecided) -> list[Effect]:
        run = self._run
        slot = run.calls.get(message.call_id) if run and run.run_id == message.run_id else None
        if slot is None or not slot.approval or slot.state != "running" or slot.request is None:
            self.log.info("late approval discarded", tool_call_id=message.call_id)
            return []
        answer = message.answer
        self.ctx._record(
            "resumed", {"request_id": slot.request.id, "ok": answer.ok, "by": "approval_handler"}
        )
        slot.request = None
        effects = self._answered(slot, answer, self.ctx.metadata_snapshot())
        return [*effects, *self._settle()]

    def _rebuilt_run(self) -> _Run:
        """The run in progress, rebuilt from the log after a restore.

        Its usage counts from the run's ``turn_start`` (as it would have without the restore),
        and messages sent with ``send`` and not yet delivered wait for the next step again.
        """
        ctx = self.ctx
        run_id = ctx.run_id or self.next_run_id()
        start = max(ctx._turn_seq, 0)  # the last turn_start (folded: no event is read)
        # What was used before the run: the whole fold less the run's own events.
        requests, tokens_in, tokens_out, calls = ctx._used
        read, written = ctx._cached
        for event in ctx.events_since(start):
            if event.type == "usage":
                requests -= event.data.get("requests", 0)
                tokens_in -= event.data.get("input_tokens", 0)
                tokens_out -= event.data.get("output_tokens", 0)
                calls -= event.data.get("tool_calls", 0)
                read -= event.data.get("cache_read_tokens", 0)
                written -= event.data.get("cache_write_tokens", 0)
            elif event.type == "tool_call":
                calls -= 1
        usage = usage_of(requests, tokens_in, tokens_out, calls, None, read, written)
        run = _Run(run_id, None, CancellationToken(), usage, start)
        run.steering.extend(undelivered(ctx, start))
        return run

    def _restore_suspension(self) -> None:
        """Rebuild a suspended run from the log (after a restore)."""
        ctx = self.ctx
        self._run = self._rebuilt_run()
        for data in ctx.suspended.values():
            call = ToolCall.model_validate(data["tool_call"])
            request = Request.model_validate(data["request"])
            self._run.calls[call.id] = _Call(
                call, "parked", request=request, approval=bool(data.get("approval"))
            )

    def restore_child_park(
        self, call: ToolCall, child_id: str, requests: tuple[Request, ...], agent_id: str
    ) -> None:
        """After a restore: mark ``call`` as parked on a child that waits on ``requests``."""
        if self._run is None:
            self._run = self._rebuilt_run()
        self._run.calls[call.id] = _Call(
            call,
            "parked",
            child_id=child_id,
            child_requests=tuple(
                r.model_copy(update={"path": (agent_id, *r.path)}) for r in requests
            ),
        )

    def _resume(self, message: ResumeRun) -> list[Effect]:
        run = self._run
        answers = dict(message.answers)
        if run is None or self.status != "suspended":
            error = UnknownRequestError(
                f"agent {self.ctx.agent_id!r} has no open requests "
                f"(it is {self.status}); nothing was changed"
            )
            return [Finish(message.reply, error=error)]
        own = {c.request.id: c for c in run.calls.values() if c.state == "parked" and c.request}
        by_child: dict[str, tuple[_Call, dict[str, Answer]]] = {}
        for slot in run.calls.values():
            if slot.state == "parked" and slot.child_id:
                for request in slot.child_requests:
                    if request.id in answers:
                        by_child.setdefault(slot.child_id, (slot, {}))[1][request.id] = answers[
                            request.id
                        ]
        known = set(own) | {rid for _, group in by_child.values() for rid in group}
        unknown = sorted(set(answers) - known)
        bad = [rid for rid, answer in answers.items() if not isinstance(answer, Answer)]
        if unknown or bad or not answers:
            open_ids = sorted(r.id for r in self.open_requests())
            detail = (
                f"unknown or already answered request ids {unknown}"
                if unknown
                else (f"answers must be Answer objects ({bad})" if bad else "no answers given")
            )
            return [
                Finish(
                    message.reply,
                    error=UnknownRequestError(
                        f"{detail}; open requests are {open_ids}; nothing was changed"
                    ),
                )
            ]
        run.reply = message.reply
        effects: list[Effect] = []
        snapshot = self.ctx.metadata_snapshot()
        for request_id, slot in own.items():
            if request_id not in answers:
                continue
            answer = answers[request_id]
            self.ctx._record("resumed", {"request_id": request_id, "ok": answer.ok})
            slot.request = None
            effects.extend(self._answered(slot, answer, snapshot))
        for child_id, (slot, group) in by_child.items():
            slot.state = "running"
            slot.child_requests = ()
            effects.append(ResumeChild(run.run_id, slot.call.id, child_id, group))
        effects.extend(self._settle())
        return effects

    def _answered(self, slot: _Call, answer: Answer, snapshot: Mapping[str, Any]) -> list[Effect]:
        tool = self._tools.get(slot.call.name)
        if tool is None:  # the spec changed between suspension and answer
            slot.outcome = ToolOutcome(f"Unknown tool {slot.call.name!r}.", True)
            slot.state = "done"
            return []
        arguments: Mapping[str, Any] = slot.call.arguments
        if slot.approval:
            slot.approval = False
            if not answer.ok:
                reason = answer.reason or "no reason given"
                slot.outcome = ToolOutcome(f"Tool call was rejected: {reason}", True)
                slot.state = "done"
                return []
            if answer.arguments is not None:
                try:
                    tool.validate(answer.arguments)
                    json_copy(answer.arguments, "approved arguments")
                except ValidationError as exc:
                    slot.outcome = ToolOutcome(
                        f"Approved arguments are invalid: {describe_validation_error(exc)}", True
                    )
                    slot.state = "done"
                    return []
                except JsonError as exc:
                    slot.outcome = ToolOutcome(f"Approved arguments are invalid: {exc}", True)
                    slot.state = "done"
                    return []
                arguments = answer.arguments
        return self._launch(slot, tool, arguments, snapshot, answer)
