"""Ray: a hop to an agent on a host vs a raw Ray actor call; a fan-out over hosts; agents per host.

    .venv/bin/python -m bench.cluster [--quick] [--json PATH]

A local Ray cluster on loopback (2 CPUs) is started here and stopped at the end.

- hop: ``ref.status`` of an agent on an agent host (one Ray call into the host, routed by id
  there) against a raw call of a trivial async Ray actor method, in alternating blocks; and
  ``ref.context()`` (the question goes through the agent's own mailbox). Target: the hop
  <= 1.3x the raw call.
- fan-out: one parent calls 1,000 ``placement="spread"`` subagents in one reply; they go
  round-robin to the 4 hosts other than the parent's (5 hosts in all); each child's scripted
  model waits 200 ms. Wall time of the parent's run, and the overlap (1,000 x 0.2 s / wall).
- agents per host: idle root agents spawned onto one host; the host process's RSS per agent.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Every Ray process on loopback (Ray gives them the machine's address otherwise).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from actors import Agent, Subagent, ToolCall, TreeLimits
from actors.testing import ScriptedModel
from bench._common import finish, fmt_time, parser

HOP_TARGET = 1.3


class Echo:
    """The baseline: a trivial async Ray actor."""

    async def ping(self, value: str) -> str:
        return value


def rss_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def hop(ray: Any, runtime: Any, rounds: int, block: int) -> dict[str, float]:
    echo = ray.remote(Echo).options(num_cpus=0).remote()
    ray.get(echo.ping.remote("warm"))
    ref = runtime.spawn(Agent("target", model=ScriptedModel(["ok"])))
    ref.run("warm up", timeout=60)
    raw: list[float] = []
    status: list[float] = []
    context: list[float] = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(block):
            ray.get(echo.ping.remote("x"))
        raw.append((time.perf_counter() - began) / block)
        began = time.perf_counter()
        for _ in range(block):
            assert ref.status == "idle"
        status.append((time.perf_counter() - began) / block)
        began = time.perf_counter()
        for _ in range(max(1, block // 4)):
            ref.context()
        context.append((time.perf_counter() - began) / max(1, block // 4))
    ray.kill(echo)
    ref.stop()
    return {
        "raw_call_s": statistics.median(raw),
        "hop_s": statistics.median(status),
        "context_query_s": statistics.median(context),
    }


def fan_out(ray: Any, hosts: int, children: int, latency: float) -> dict[str, Any]:
    from actors.ray import RayRuntime

    worker = Agent("worker", model=ScriptedModel(["ok"], latency=latency, per_agent=True))
    calls = [
        ToolCall(id=f"w{i}", name="worker", arguments={"task": f"item {i}"})
        for i in range(children)
    ]
    parent = Agent(
        "parent",
        model=ScriptedModel([calls, "all done"]),
        subagents=[Subagent(worker, timeout=300.0, placement="spread")],
    )
    limits = TreeLimits(max_depth=5, max_children=children + 10, max_agents=children + 10)
    began = time.perf_counter()
    with RayRuntime(hosts=hosts, limits=limits) as runtime:
        started = time.perf_counter() - began
        ref = runtime.spawn(parent)
        began = time.perf_counter()
        result = ref.run("go", timeout=600)
        wall = time.perf_counter() - began
        assert result.output == "all done", result
        done = sum(1 for c in ref.tree().children if c.status == "finished")
    return {
        "hosts": hosts,
        "children": children,
        "latency_s": latency,
        "wall_s": wall,
        "overlap": children * latency / wall,
        "finished": done,
        "hosts_start_s": started,
    }


def per_host(ray: Any, agents: int) -> dict[str, Any]:
    from actors.ray import RayRuntime

    spec = Agent("idle", model=ScriptedModel(["ok"]))
    with RayRuntime(hosts=1) as runtime:
        (handle,) = runtime.host_handles()
        pid = ray.get(handle.ready.remote())
        runtime.spawn(spec).stop()  # warm: first spawn loads what every agent uses
        before = rss_of(pid)
        began = time.perf_counter()
        for _ in range(agents):
            runtime.spawn(spec)
        spawn = (time.perf_counter() - began) / agents
        after = rss_of(pid)
        live = runtime.live_agents()
    return {
        "agents": agents,
        "live": live,
        "spawn_per_agent_s": spawn,
        "host_rss_bytes": after,
        "rss_per_agent_bytes": (after - before) / agents,
    }


def main() -> int:
    args = parser(__doc__).parse_args()
    quick = args.quick
    try:
        import ray
    except ImportError:
        payload = {"error": "ray is not installed (pip install 'actors[ray]')"}
        return finish(payload, args.json, lambda: payload["error"])
    began = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}},
    )
    init_s = time.perf_counter() - began
    try:
        from actors.ray import RayRuntime

        with RayRuntime(hosts=2) as runtime:
            hops = hop(ray, runtime, rounds=3 if quick else 7, block=50 if quick else 300)
        fan = fan_out(ray, hosts=2 if quick else 5, children=40 if quick else 1000, latency=0.2)
        hosted = per_host(ray, agents=200 if quick else 5000)
    finally:
        ray.shutdown()
    payload: dict[str, Any] = {"ray_init_s": init_s, **hops, "fanout": fan, "per_host": hosted}

    def report() -> str:
        ratio = hops["hop_s"] / hops["raw_call_s"]
        return "\n".join(
            [
                f"ray.init (2 CPUs, loopback): {fmt_time(init_s)}",
                f"raw Ray actor call: {fmt_time(hops['raw_call_s'])}; hop to an agent on a host "
                f"(ref.status): {fmt_time(hops['hop_s'])} = {ratio:.2f}x (target <= "
                f"{HOP_TARGET}x); ref.context(): {fmt_time(hops['context_query_s'])}",
                f"fan-out: {fan['children']:,} spread children over {fan['hosts'] - 1} hosts "
                f"(the parent on another), "
                f"{fmt_time(fan['latency_s'])} model wait: wall {fmt_time(fan['wall_s'])}, "
                f"overlap {fan['overlap']:.0f}x; hosts started in {fmt_time(fan['hosts_start_s'])}",
                f"agents per host: {hosted['live']:,} idle roots on one host, "
                f"{hosted['rss_per_agent_bytes'] / 1024:.1f} KiB each "
                f"(host RSS {hosted['host_rss_bytes'] / 1024**2:,.0f} MiB), spawn "
                f"{fmt_time(hosted['spawn_per_agent_s'])} each from the driver",
            ]
        )

    return finish(payload, args.json, report)


if __name__ == "__main__":
    sys.exit(main())
