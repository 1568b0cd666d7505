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
- peer messages between hosts: senders on host 0 send ``ContextUpdate.send`` messages to
  listeners on host 1 (``on_message="queue"``: logged, no turn), in a SQLite store. Latency:
  from the sender's ``message_sent`` to the receiver's ``message_received`` (both stamped by
  the system clock of the one machine), one message at a time, against a raw Ray actor call.
  Throughput: 4 senders send 20,000 messages together; from their runs' start until the
  sending host's lanes are answered (every message logged by its receiver). Target: >= 5,000
  messages/s.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Every Ray process on loopback (Ray gives them the machine's address otherwise).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from actors import (
    Agent,
    ContextUpdate,
    RunContext,
    Subagent,
    ToolCall,
    ToolResultMessage,
    TreeLimits,
)
from actors.testing import FunctionModel, ScriptedModel, call
from bench._common import finish, fmt_time, parser

HOP_TARGET = 1.3
PEER_RATE_TARGET = 5_000.0  # messages/s between two hosts (issue 29)
SENDS_PER_CALL = 500


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


def tell_many(ctx: RunContext[Any], to: list[str], first: int, count: int) -> tuple[str, Any]:
    """Send ``count`` messages, round-robin over ``to``.

    Args:
        to: The receivers.
        first: The number of the first message.
        count: How many.
    """
    update = ContextUpdate()
    for i in range(first, first + count):
        update = update.send(to[i % len(to)], f"message {i}")
    return "sent", update


def _sender(messages: list[Any], tools: list[Any]) -> Any:
    """Prompt ``"<count> <to>,<to>..."``: sends that many messages in calls of 500."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return "done"
    count, _, to = str(last.content).partition(" ")
    total = int(count)
    return [
        call("tell_many", to=to.split(","), first=i, count=min(SENDS_PER_CALL, total - i))
        for i in range(0, total, SENDS_PER_CALL)
    ]


SENDER = Agent("sender", model=FunctionModel(_sender), tools=[tell_many])
LISTENER = Agent("listener", model=ScriptedModel(["unused"]), on_message="queue")


def _delays(refs: list[Any]) -> list[float]:
    """Seconds from each message's send to its arrival, read from the logs."""
    sent: dict[str, Any] = {}
    got: dict[str, Any] = {}
    for ref in refs:
        for event in ref.context().events:
            if event.type == "message_sent":
                sent[event.data["message_id"]] = event.created_at
            elif event.type == "message_received":
                got[event.data["message_id"]] = event.created_at
    return [(got[key] - sent[key]).total_seconds() for key in got if key in sent]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def peer_messages(ray: Any, messages: int, one_by_one: int, db: Path) -> dict[str, Any]:
    from actors.ray import RayRuntime
    from actors.store import SQLiteStore

    echo = ray.remote(Echo).options(num_cpus=0).remote()
    ray.get(echo.ping.remote("warm"))
    began = time.perf_counter()
    for _ in range(one_by_one):
        ray.get(echo.ping.remote("x"))
    raw = (time.perf_counter() - began) / one_by_one
    ray.kill(echo)
    with SQLiteStore(db) as store, RayRuntime(hosts=2, store=store) as runtime:
        # Roots go round-robin: listeners on host 1, senders on host 0.
        listeners, senders = [], []
        for i in range(10):
            senders.append(runtime.spawn(SENDER, agent_id=f"sender-{i}"))
            listeners.append(runtime.spawn(LISTENER, agent_id=f"listener-{i}"))
        host = runtime.host_of(senders[0].agent_id)
        assert {runtime.host_of(s.agent_id) for s in senders} == {host}
        assert host not in {runtime.host_of(r.agent_id) for r in listeners}
        drained = runtime.host_handles()[host].peers_drained
        to = ",".join(r.agent_id for r in listeners)
        senders[0].run(f"10 {to}", timeout=120)  # warm: lanes, places, store tables
        ray.get(drained.remote())
        lone, lone_to = senders[1], listeners[1].agent_id
        for _ in range(one_by_one):
            lone.run(f"1 {lone_to}", timeout=120)
            ray.get(drained.remote())
        lone_delays = _delays([lone, listeners[1]])[-one_by_one:]
        busy = senders[2:6]
        share = messages // len(busy)
        began = time.perf_counter()
        runs = [s.run_async(f"{share} {to}") for s in busy]
        for run in runs:
            assert run.result(600).output == "done"
        ray.get(drained.remote())
        wall = time.perf_counter() - began
        arrived = sum(
            len([e for e in r.context().events if e.type == "message_received"]) for r in listeners
        )
        busy_delays = _delays([*busy, *listeners])
    sent = share * len(busy)
    return {
        "raw_call_s": raw,
        "one_by_one": one_by_one,
        "latency_median_s": statistics.median(lone_delays),
        "latency_p99_s": _percentile(lone_delays, 0.99),
        "messages": sent,
        "arrived": arrived - 10 - one_by_one,
        "wall_s": wall,
        "rate_per_s": sent / wall,
        "loaded_latency_median_s": statistics.median(busy_delays),
        "loaded_latency_p99_s": _percentile(busy_delays, 0.99),
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
        with tempfile.TemporaryDirectory(prefix="actors-bench-") as folder:
            peers = peer_messages(
                ray,
                messages=400 if quick else 20_000,
                one_by_one=10 if quick else 200,
                db=Path(folder) / "peers.db",
            )
    finally:
        ray.shutdown()
    payload: dict[str, Any] = {
        "ray_init_s": init_s,
        **hops,
        "fanout": fan,
        "per_host": hosted,
        "peers": peers,
    }

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
                f"peer messages host 0 -> host 1 (SQLite): one at a time, send to arrival "
                f"median {fmt_time(peers['latency_median_s'])} (p99 "
                f"{fmt_time(peers['latency_p99_s'])}; raw Ray call "
                f"{fmt_time(peers['raw_call_s'])}); {peers['messages']:,} from 4 senders to 10 "
                f"receivers: {peers['rate_per_s']:,.0f}/s (target >= {PEER_RATE_TARGET:,.0f}/s), "
                f"{peers['arrived']:,} arrived, send to arrival median "
                f"{fmt_time(peers['loaded_latency_median_s'])} (p99 "
                f"{fmt_time(peers['loaded_latency_p99_s'])})",
            ]
        )

    return finish(payload, args.json, report)


if __name__ == "__main__":
    sys.exit(main())
