"""A program that runs a tree on a Ray cluster started elsewhere, then exits (a subprocess).

    python cluster_driver.py ADDRESS sqlite PATH   # a spread tree, printed as JSON
    python cluster_driver.py ADDRESS postgres DSN  # the same, then a host killed mid-run

It never calls ``shutdown``: exiting must stop its hosts by itself.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import ray

from actors import Agent, Subagent, ToolResultMessage
from actors.ray import RayRuntime
from actors.store import SQLiteStore
from actors.testing import ScriptedModel, call
from on_ray import agents


def postgres(dsn: str) -> Any:
    from actors.store import PostgresStore

    return PostgresStore(dsn)


def main(address: str, kind: str, where: str) -> None:
    store: Any = SQLiteStore(where) if kind == "sqlite" else (lambda: postgres(where))
    runtime = RayRuntime(address, hosts=2, store=store)
    pids = [ray.get(h.ready.remote()) for h in runtime.host_handles()]
    ref = runtime.spawn(agents.PIDS_LEAD)
    result = ref.run("go", timeout=60)
    report: dict[str, Any] = {"output": result.output, "host_pids": pids}
    if kind == "postgres":
        latch = (
            ray.remote(agents.Latch)
            .options(name=agents.LATCH, namespace=agents.LATCH_NAMESPACE, num_cpus=0)
            .remote()
        )
        hanging = Agent(
            "hanging",
            model=ScriptedModel([call("hang"), "never"], per_agent=True),
            tools=[agents.hang],
            tool_timeout=120,
        )
        lead = Agent(
            "lead",
            model=ScriptedModel([call("far", task="hang"), "carried on"], per_agent=True),
            subagents=[Subagent(hanging, name="far", placement="spread")],
        )
        faulty = runtime.spawn(lead, agent_id="faulty")
        future = faulty.run_async("go")
        ray.get(latch.wait.remote(), timeout=60)
        ray.kill(runtime.host_handles()[1 - runtime.host_of("faulty")], no_restart=False)
        ended = future.result(60)
        (answer,) = [m for m in ended.messages if isinstance(m, ToolResultMessage)]
        stored = store().load(faulty.session_id)
        child = next(a for a in stored.agents if a.record.agent_id == "faulty-sub-1")
        report.update(
            fault_output=ended.output,
            fault_answer=answer.content,
            child_status=child.record.status,
        )
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
