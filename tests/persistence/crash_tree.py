"""An agent tree whose tools record their side effects in a file; killed by test_crash.py.

Usage: python crash_tree.py DB SIDE_EFFECTS SESSION_ID [restore]

Prints one line per event the root appends ("EV ...") so the test can pick a kill point, and,
after each run, "TOLD <json>" with the (agent, seq, type) of every event that run's result
reported to this host.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from actors import Agent, Answer, Message, RunContext, Runtime, ToolCall, ToolDefinition, tool
from actors.context._messages import AssistantMessage, ToolResultMessage, UserMessage
from actors.store import SQLiteStore
from actors.testing import FunctionModel


@tool
def record(ctx: RunContext[Any], item: str) -> str:
    """Record a side effect, durably, then report it.

    Args:
        item: What to record.
    """
    with open(os.environ["CRASH_SIDE_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(f"{ctx.agent_id} {ctx.tool_call_id} {item}\n")
        out.flush()
        os.fsync(out.fileno())
    return f"recorded {item}"


def _answer_or_call(name: str, calls: list[tuple[str, dict[str, Any]]]) -> Any:
    def reply(messages: list[Message], tools: list[ToolDefinition]) -> Any:
        last = messages[-1]
        if isinstance(last, ToolResultMessage):
            return f"{name} done after {len(messages)} messages"
        if isinstance(last, UserMessage):
            turn = sum(isinstance(m, UserMessage) for m in messages)
            return AssistantMessage(
                tool_calls=tuple(
                    ToolCall(id=f"{name}-t{turn}-m{len(messages)}-{i}", name=tool, arguments=args)
                    for i, (tool, args) in enumerate(calls)
                )
            )
        return f"{name} idle"

    return reply


def specs() -> Agent[Any]:
    worker = Agent(
        "worker",
        model=FunctionModel(
            _answer_or_call("worker", [("record", {"item": "a"}), ("record", {"item": "b"})])
        ),
        tools=[record],
    )
    return Agent(
        "lead",
        model=FunctionModel(
            _answer_or_call(
                "lead",
                [
                    ("worker", {"task": "first"}),
                    ("worker", {"task": "second"}),
                    ("record", {"item": "lead"}),
                ],
            )
        ),
        tools=[record],
        subagents=[worker],
    )


def main() -> None:
    db, session_id = sys.argv[1], sys.argv[2]
    restore = len(sys.argv) > 3 and sys.argv[3] == "restore"
    with SQLiteStore(db) as store, Runtime() as runtime:
        if restore:
            ref = runtime.restore(session_id, store=store, agents=[specs()])
        else:
            ref = runtime.spawn(specs(), store=store, session_id=session_id)

        def show(event: Any) -> None:
            if hasattr(event, "seq"):
                print(f"EV {event.seq} {event.type}", flush=True)

        ref.subscribe(show)
        for turn in range(3):
            result = ref.run(f"turn {turn}", timeout=30)
            told = [[result.agent_id, e.seq, e.type] for e in result.events]
            print("TOLD " + json.dumps(told), flush=True)
        print("DONE", flush=True)
    _ = Answer


if __name__ == "__main__":
    main()
