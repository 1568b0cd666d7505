"""One process of a shared budget: it runs agents that draw on a budget kept in a store.

Usage: python shared_worker.py STORE RUNS [hang]

STORE is ``sqlite:PATH`` or ``postgres:SCHEMA`` (in the database of BUDGET_DSN).
Once ready (imports done, store open) it prints READY and waits for a line on stdin, so the
test starts every process's requests at once. Then it spawns `AGENTS` agents with `BUDGET`
and runs each RUNS / AGENTS times, the agents at once (each run is one model request), and
prints one JSON line: how many requests its model received (what a provider would bill), and
how the runs ended.

With ``hang``, its model prints SENT for each request and never replies: the test SIGKILLs the
process with every request in flight (each agent's session is ``p<pid>-<n>``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections import Counter
from typing import Any

from actors import Agent, AssistantMessage, Budget, ModelResponse, Runtime, Usage
from actors.exceptions import BudgetExceeded
from actors.store import PostgresStore, SQLiteStore
from actors.testing import FunctionModel

BUDGET = Budget(requests=100, output_tokens=100 * 16, shared="team")
AGENTS = 5
USAGE = Usage(requests=1, input_tokens=10, output_tokens=3)

_billed = 0
_lock = threading.Lock()
_never = threading.Event()


def _hang(messages: Any, tools: Any) -> ModelResponse:
    with _lock:  # one line each: print writes the text and its newline apart
        sys.stdout.write("SENT\n")
        sys.stdout.flush()
    _never.wait()
    raise AssertionError("unreachable")


def _reply(messages: Any, tools: Any) -> ModelResponse:
    global _billed
    with _lock:
        _billed += 1
    return ModelResponse(AssistantMessage(content="ok"), USAGE, "billed")


def main() -> None:
    where, runs = sys.argv[1], int(sys.argv[2])
    kind, _, target = where.partition(":")
    if kind == "sqlite":
        store: Any = SQLiteStore(target)
    else:
        store = PostgresStore(os.environ["BUDGET_DSN"], schema=target)
    hang = sys.argv[3:] == ["hang"]
    model = FunctionModel(_hang if hang else _reply, name="billed")
    spec = Agent("w", model=model, model_settings={"max_tokens": 16})
    print("READY", flush=True)
    sys.stdin.readline()
    ended: Counter[str] = Counter()
    with store, Runtime(workers=4) as runtime:
        refs = [
            runtime.spawn(spec, store=store, budget=BUDGET, session_id=f"p{os.getpid()}-{n}")
            for n in range(AGENTS)
        ]
        for _ in range(runs // AGENTS):
            for future in [ref.run_async("go") for ref in refs]:
                try:
                    future.result(timeout=60)
                    ended["ok"] += 1
                except BudgetExceeded:
                    ended["BudgetExceeded"] += 1
                except Exception as exc:  # reported to the test, which fails on it
                    ended[f"{type(exc).__name__}: {exc}"[:300]] += 1
    print(json.dumps({"billed": _billed, "ended": ended}), flush=True)


if __name__ == "__main__":
    main()
