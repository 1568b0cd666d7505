"""Simulation with real models: agents' requests over HTTP in flight together, against a raw client.

    .venv/bin/python -m bench.sim_http [--quick] [--json PATH]

A loopback OpenAI-wire server (`bench.wire_server`, its own process) answers every request in
200 ms. 1,000 agents each ask three questions, one a virtual second, in a `Simulation`; a raw
`httpx.AsyncClient` sends the same requests in the same run (each client's three in turn, every
client at once). Both use the same client layout, a pool of 10 connections for every 10
agents (one model per 10 agents in the simulation), so that the ratio measures the simulator,
not httpx: one pool for 1,000 requests at once is far slower in httpx (issue 31, item 5, is
about that layer). Reported: the wall time of each, their ratio (target <= 1.5x), and requests
per CPU-second of this process (the server's CPU is not counted: it is another process).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from actors import Agent
from actors.models import OpenAIChatModel
from actors.sim import Simulation
from actors.testing import allow_model_requests
from bench._common import finish, parser
from bench.wire_server import serve, stats

RATIO_TARGET = 1.5
QUESTIONS = 3
POOL = 10  # connections per client, and agents per client


def limits() -> httpx.Limits:
    return httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL)


def question(agent: int, n: int) -> str:
    return f"agent {agent}, question {n}"


def simulated(url: str, agents: int, max_in_flight: int) -> dict[str, Any]:
    """Every agent asks its questions at virtual times 0, 1, 2: one request each."""
    sim = Simulation(seed=1, max_in_flight=max_in_flight)
    # The model's own client never holds more connections than requests it has in flight.
    models = [OpenAIChatModel("fake", base_url=url) for _ in range(0, agents, POOL)]
    refs = [
        sim.spawn(Agent("asker", model=models[i // POOL]), agent_id=f"a{i}") for i in range(agents)
    ]
    for n in range(QUESTIONS):

        def ask(n: int = n) -> None:
            for i, ref in enumerate(refs):
                ref.run_async(question(i, n))

        sim.at(float(n), ask)
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    sim.run()
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    done = sim.requests
    assert done.failed == 0, done
    assert done.done == agents * QUESTIONS, done
    return {"wall_s": wall, "cpu_s": cpu, "requests": done.done, "max_in_flight": max_in_flight}


async def _raw(url: str, agents: int) -> int:
    clients = [httpx.AsyncClient(limits=limits(), timeout=300.0) for _ in range(0, agents, POOL)]
    try:

        async def one(agent: int) -> int:
            client = clients[agent // POOL]
            messages: list[dict[str, Any]] = []
            for n in range(QUESTIONS):
                messages.append({"role": "user", "content": question(agent, n)})
                reply = await client.post(
                    url + "/chat/completions",
                    json={"model": "fake", "messages": messages},
                    headers={"authorization": "Bearer none"},
                )
                reply.raise_for_status()
                messages.append(reply.json()["choices"][0]["message"])
            return QUESTIONS

        return sum(await asyncio.gather(*(one(i) for i in range(agents))))
    finally:
        for client in clients:
            await client.aclose()


def raw(url: str, agents: int) -> dict[str, Any]:
    gc.collect()
    began, cpu = time.perf_counter(), time.process_time()
    sent = asyncio.run(_raw(url, agents))
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "requests": sent}


def main() -> int:
    args = parser(__doc__).parse_args()
    agents = 20 if args.quick else 1_000
    latency = 0.02 if args.quick else 0.2
    with allow_model_requests(True), serve(latency=latency) as url:
        first = raw(url, agents)
        sim = simulated(url, agents, max_in_flight=agents)
        default = simulated(url, agents, max_in_flight=64)
        # The machine is shared: the quicker of two raw runs, one before and one after.
        base = min(first, raw(url, agents), key=lambda figures: figures["wall_s"])
        server = stats(url)
    payload = {
        "agents": agents,
        "questions": QUESTIONS,
        "latency_s": latency,
        "raw": base,
        "sim": sim,
        "sim_default": default,
        "ratio": sim["wall_s"] / base["wall_s"],
        "ratio_default": default["wall_s"] / base["wall_s"],
        "server_max_in_flight": server["max_in_flight"],
    }
    return finish(payload, args.json, lambda: render(payload))


def _per_cpu(figures: dict[str, Any]) -> str:
    cpu = figures["cpu_s"]
    return f"{figures['requests'] / cpu:,.0f}" if cpu > 0 else "-"


def render(payload: dict[str, Any]) -> str:
    """The section's markdown table (also used by ``python -m bench``)."""
    title = "### Simulation with real models"
    if "error" in payload:
        return f"{title}\n\nfailed: {payload['error']}"
    raw, sim, default = payload["raw"], payload["sim"], payload["sim_default"]
    ok = "meets" if payload["ratio"] <= RATIO_TARGET else "misses"
    what = (
        f"{payload['agents']:,} agents x {payload['questions']} requests, "
        f"{payload['latency_s'] * 1000:.0f} ms each"
    )
    return "\n".join(
        [
            title,
            "",
            "| measure | wall | ratio to raw | requests per CPU-second |",
            "| --- | --- | --- | --- |",
            f"| raw httpx client, {what} | {raw['wall_s']:.2f} s | 1.00x | {_per_cpu(raw)} |",
            f"| Simulation, max_in_flight={sim['max_in_flight']:,} | {sim['wall_s']:.2f} s | "
            f"{payload['ratio']:.2f}x ({ok} the {RATIO_TARGET}x target) | {_per_cpu(sim)} |",
            f"| Simulation, max_in_flight={default['max_in_flight']} (the default) | "
            f"{default['wall_s']:.2f} s | {payload['ratio_default']:.2f}x | "
            f"{_per_cpu(default)} |",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
