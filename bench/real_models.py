"""Real models over HTTP: 1,000 agents x 3 requests against a loopback server at 200 ms.

    .venv/bin/python -m bench.real_models [--quick] [--agents N] [--json PATH]

Every row sends the same requests to the same server (bench/wire_server.py, in its own
process, 200 ms +/- 20 ms a request): each agent (or raw client task) sends its 3 requests in
turn, all agents at once. Printed per row: the wall time, the ratio to the raw client's
(best pool layout) in the same run (issue 31's target: <= 1.5x on `Runtime`), and requests
per CPU-second of this process (the server's CPU is not counted).

Rows (each one function of `ROWS`; a row takes the server's URL and the sizes). Absolute
times on a shared machine drift, so the rows run in interleaved rounds (3 at full size) and
each figure is the median of the rounds, each ratio the median of the ratios within a round;
the naive client runs once, cut off after 90 s (it collapses at this size).

- raw httpx, best layout: one httpx client (of one connection) per task, sharing one SSL
  context (the layout that measured best: httpx's CPU per request grows with the connections
  of one client, and a client's own SSL context costs ~90 ms to make);
- raw httpx, naive: one ``httpx.AsyncClient()`` with its default limits (100 connections),
  for every task: what one writes first;
- `Runtime`, one shared `OpenAIChatModel` for every agent;
- `Runtime`, one `OpenAIChatModel` per agent (same base URL: they share connections).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from actors import Agent, Runtime, TreeLimits
from actors.models import OpenAIChatModel
from actors.testing import allow_model_requests
from bench._common import finish, fmt_time, parser
from bench.wire_server import serve, stats

RATIO_TARGET = 1.5
ROUNDS = 3
NAIVE_BOUND = 90.0  # seconds: at 1,000 x 3 the naive client takes minutes, mostly on CPU
_BOUND = 600.0  # no row may take longer than this (a hang fails the section instead)


@dataclass(frozen=True)
class Sizes:
    agents: int
    requests_each: int
    latency: float
    jitter: float

    @property
    def requests(self) -> int:
        return self.agents * self.requests_each


FULL = Sizes(agents=1_000, requests_each=3, latency=0.2, jitter=0.02)
QUICK = Sizes(agents=20, requests_each=2, latency=0.01, jitter=0.0)

_BODY = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "hi"}]}).encode()
_HEADERS = {"content-type": "application/json", "accept": "application/json"}


@dataclass
class Timed:
    """What a row measured: wall and CPU seconds, requests that failed or never finished."""

    wall_s: float
    cpu_s: float
    failed: int
    unfinished: int = 0


def _timed(work: Callable[[], int]) -> Timed:
    began, cpu = time.perf_counter(), time.process_time()
    failed = work()
    return Timed(time.perf_counter() - began, time.process_time() - cpu, failed)


# -- rows -----------------------------------------------------------------------------------


async def _raw(
    url: str, sizes: Sizes, clients: list[httpx.AsyncClient], bound: float = _BOUND
) -> Timed:
    per_client = -(-sizes.agents // len(clients))
    finished = [0]

    async def agent(i: int) -> None:
        client = clients[i // per_client]
        for _ in range(sizes.requests_each):
            response = await client.post(url + "/chat/completions", content=_BODY, headers=_HEADERS)
            response.raise_for_status()
            finished[0] += 1

    began, cpu = time.perf_counter(), time.process_time()
    tasks = [asyncio.ensure_future(agent(i)) for i in range(sizes.agents)]
    try:
        await asyncio.wait(tasks, timeout=bound)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        for task in tasks:
            task.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))
    failed = sum(
        isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError) for r in done
    )
    unfinished = sizes.requests - finished[0] - failed
    return Timed(wall, cpu, failed, unfinished)


def raw_best(url: str, sizes: Sizes) -> Timed:
    """Raw httpx: a client of one connection per task, one SSL context for all."""
    ssl = httpx.create_ssl_context()  # ~90 ms each if every client made its own
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)

    async def main() -> Timed:
        clients = [httpx.AsyncClient(limits=limits, verify=ssl) for _ in range(sizes.agents)]
        return await _raw(url, sizes, clients)

    return asyncio.run(main())


def raw_naive(url: str, sizes: Sizes) -> Timed:
    """Raw httpx: one ``httpx.AsyncClient()`` (default limits: 100 connections) for all."""

    async def main() -> Timed:
        clients = [httpx.AsyncClient(timeout=httpx.Timeout(300.0, connect=10.0))]
        return await _raw(url, sizes, clients, bound=NAIVE_BOUND)

    return asyncio.run(main())


def _on_runtime(sizes: Sizes, model_for: Callable[[int], OpenAIChatModel]) -> Timed:
    """Each agent runs ``requests_each`` prompts in turn (a model request each), all at once."""
    limits = TreeLimits(max_agents=sizes.agents + 100)
    with Runtime(limits=limits) as runtime:
        refs = [runtime.spawn(Agent("client", model=model_for(i))) for i in range(sizes.agents)]
        finished = threading.Event()
        lock = threading.Lock()
        left = [sizes.agents]
        failed = [0]

        def start(ref: Any, turn: int) -> None:
            def ended(future: Any) -> None:
                try:
                    future.result()
                except Exception:
                    with lock:
                        failed[0] += 1
                if turn + 1 < sizes.requests_each:
                    start(ref, turn + 1)
                    return
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

            ref.run_async(f"question {turn}").add_done_callback(ended)

        def work() -> int:
            for ref in refs:
                start(ref, 0)
            if not finished.wait(_BOUND):
                raise TimeoutError(f"the runs did not end within {_BOUND:g} s")
            return failed[0]

        return _timed(work)


def runtime_shared(url: str, sizes: Sizes) -> Timed:
    """`Runtime`, every agent with the same `OpenAIChatModel`."""
    model = OpenAIChatModel("fake", base_url=url)
    return _on_runtime(sizes, lambda _: model)


def runtime_per_agent(url: str, sizes: Sizes) -> Timed:
    """`Runtime`, each agent with an `OpenAIChatModel` of its own (same base URL)."""
    return _on_runtime(sizes, lambda _: OpenAIChatModel("fake", base_url=url))


@dataclass(frozen=True)
class Row:
    """One way of sending the requests: ``run(url, sizes)`` sends ``sizes.requests``."""

    key: str
    label: str
    run: Callable[[str, Sizes], Timed]
    every_round: bool = True


ROWS = [
    Row("raw_best", "raw httpx, a client of 1 connection per task", raw_best),
    Row("raw_naive", "raw httpx, one `httpx.AsyncClient()` (100 connections)", raw_naive, False),
    Row("runtime_shared", "`Runtime`, one shared `OpenAIChatModel`", runtime_shared),
    Row("runtime_per_agent", "`Runtime`, one `OpenAIChatModel` per agent", runtime_per_agent),
]
"""The baseline (``raw_best``) first; another host adds its row here."""


# -- the section ----------------------------------------------------------------------------


def _one(row: Row, url: str, sizes: Sizes) -> dict[str, Any]:
    before = stats(url)
    timed = row.run(url, sizes)
    after = stats(url)
    return {
        "wall_s": timed.wall_s,
        "cpu_s": timed.cpu_s,
        "failed": timed.failed,
        "unfinished": timed.unfinished,
        # `stats` opens a connection of its own each time: not the row's
        "connections": after["connections"] - before["connections"] - 1,
    }


def measure(quick: bool, agents: int | None = None) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    if agents is not None:  # a mid size: the full latency, fewer agents
        sizes = Sizes(agents, sizes.requests_each, sizes.latency, sizes.jitter)
    rounds = 1 if quick else ROUNDS
    runs: dict[str, list[dict[str, Any]]] = {row.key: [] for row in ROWS}
    with allow_model_requests(True), serve(latency=sizes.latency, jitter=sizes.jitter) as url:
        for r in range(rounds):
            chosen = [row for row in ROWS if row.every_round or r == 0]
            for row in chosen[r % len(chosen) :] + chosen[: r % len(chosen)]:
                runs[row.key].append(_one(row, url, sizes))
            base = runs["raw_best"][-1]
            for row in chosen:
                sample = runs[row.key][-1]
                sample["ratio"] = sample["wall_s"] / base["wall_s"]
                sample["cpu_ratio"] = sample["cpu_s"] / base["cpu_s"] if base["cpu_s"] else None
    rows: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        samples = runs[row.key]
        cpu = statistics.median(s["cpu_s"] for s in samples)
        finished = sizes.requests - max(s["unfinished"] for s in samples)
        rows[row.key] = {
            "label": row.label,
            "rounds": len(samples),
            "wall_s": statistics.median(s["wall_s"] for s in samples),
            "cpu_s": cpu,
            "ratio": statistics.median(s["ratio"] for s in samples),
            "cpu_ratio": _median_or_none([s["cpu_ratio"] for s in samples]),
            "requests": sizes.requests,
            "finished": finished,
            "failed": max(s["failed"] for s in samples),
            "requests_per_cpu_s": finished / cpu if cpu else None,
            "connections": max(s["connections"] for s in samples),
            "samples": samples,
        }
    return {
        "quick": quick,
        "agents": sizes.agents,
        "requests_each": sizes.requests_each,
        "latency_s": sizes.latency,
        "jitter_s": sizes.jitter,
        "target_ratio": RATIO_TARGET,
        "naive_bound_s": NAIVE_BOUND,
        "rows": rows,
    }


def _median_or_none(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def render(payload: dict[str, Any]) -> str:
    """The section's markdown table (also used by ``python -m bench``)."""
    title = "### Real models over HTTP"
    if "error" in payload:
        return f"{title}\n\nfailed: {payload['error']}"
    lines = [
        title,
        "",
        f"{payload['agents']:,} agents x {payload['requests_each']} requests each (in turn, "
        f"all agents at once), loopback server at {fmt_time(payload['latency_s'])} "
        f"+/- {fmt_time(payload['jitter_s'])}; target on `Runtime`: <= "
        f"{payload['target_ratio']:g}x the raw client. Medians of "
        f"{payload['rows']['raw_best']['rounds']} interleaved rounds.",
        "",
        "| client | wall | ÷ raw (best layout) | requests / CPU-s | CPU ÷ raw | failed "
        "| connections opened |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in payload["rows"].values():
        per_cpu = row["requests_per_cpu_s"]
        wall, ratio = fmt_time(row["wall_s"]), f"{row['ratio']:.2f}x"
        cpu_ratio = f"{row['cpu_ratio']:.2f}x" if row["cpu_ratio"] else "-"
        if row["finished"] + row["failed"] < row["requests"]:
            wall = f"cut off at {wall}: {row['finished']:,} of {row['requests']:,} done"
            ratio = "-"
        lines.append(
            f"| {row['label']} | {wall} | {ratio} "
            f"| {f'{per_cpu:,.0f}' if per_cpu else '-'} "
            f"| {cpu_ratio} | {row['failed']} "
            f"| {row['connections']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--agents", type=int, help="agents (and raw tasks) instead of 1,000")
    args = p.parse_args(argv)
    payload = measure(args.quick, args.agents)
    return finish(payload, args.json, lambda: render(payload))


if __name__ == "__main__":
    sys.exit(main())
