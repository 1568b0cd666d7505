"""A tree with a budget whose "provider" bills every request it receives; killed by a test.

Usage: python budget_crash.py DB BILL SESSION_ID

The models write one line per request they receive to BILL (fsync'd: what a provider would
charge) and print "BILLED" once it is written, so the test can SIGKILL the process with
requests in flight. Each request is billed at `USAGE`, which is also what its reply reports.
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from typing import Any

from actors import (
    Agent,
    AssistantMessage,
    Budget,
    Message,
    ModelResponse,
    Price,
    Runtime,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    TreeLimits,
    Usage,
)
from actors.store import SQLiteStore
from actors.testing import FunctionModel

CHILDREN = 20
USAGE = Usage(requests=1, input_tokens=10, output_tokens=5)
PRICE = Price(input=Decimal(1), output=Decimal(2))
BUDGET = Budget(requests=25, usd=Decimal("0.01"), prices={"billed": PRICE})
LIMITS = TreeLimits(max_children=CHILDREN, max_agents=CHILDREN * 3)


def _bill(agent_id: str) -> None:
    with open(os.environ["BUDGET_BILL"], "a", encoding="utf-8") as out:
        out.write(f"{agent_id}\n")
        out.flush()
        os.fsync(out.fileno())
    print("BILLED", flush=True)


def _root(messages: list[Message], tools: list[ToolDefinition]) -> Any:
    _bill("root")
    if isinstance(messages[-1], ToolResultMessage):
        message = AssistantMessage(content="done")
    else:
        turn = sum(m.role == "user" for m in messages)
        message = AssistantMessage(
            tool_calls=tuple(
                ToolCall(id=f"t{turn}-{i}", name="w", arguments={"task": f"item {i:02d}"})
                for i in range(CHILDREN)
            )
        )
    return ModelResponse(message, USAGE, "billed")


def _child(messages: list[Message], tools: list[ToolDefinition]) -> Any:
    _bill("child")
    return ModelResponse(AssistantMessage(content="ok"), USAGE, "billed")


def specs() -> Agent[Any]:
    worker = Agent(
        "w", model=FunctionModel(_child, name="billed"), model_settings={"max_tokens": 8}
    )
    return Agent(
        "root",
        model=FunctionModel(_root, name="billed"),
        model_settings={"max_tokens": 8},
        subagents=[worker],
    )


def main() -> None:
    db, session_id = sys.argv[1], sys.argv[2]
    with SQLiteStore(db) as store, Runtime(limits=LIMITS) as runtime:
        ref = runtime.spawn(specs(), store=store, session_id=session_id, budget=BUDGET)
        ref.run("first", timeout=60)
        print("DONE", flush=True)


if __name__ == "__main__":
    main()
