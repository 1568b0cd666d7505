"""Benchmark of the session stores: durable appends per second, and restore time.

    .venv/bin/python bench/store.py                 # full size, prints a markdown table
    .venv/bin/python bench/store.py --json out.json # also writes the figures as JSON
    .venv/bin/python bench/store.py --smoke         # tiny sizes: checks that it runs
    .venv/bin/python bench/store.py --postgres DSN  # the Postgres server to measure

Appends go through `append_events` in batches, as the runtime writes one batch per step
(10 events), and one event at a time for comparison; each figure is the best of 3 runs.
Restore is `store.load(session_id)` followed by `AgentContext.deserialize` of every agent
(best of 5): a session of 10,000 events in one agent, and one of 10 agents with 1,000 events
each. Every file lives in a temporary directory.
Targets (issue 7): at least 20,000 events/s in batch mode, restore within 0.2 s.

Postgres (issue 17) is measured the same way, over loopback, when a server is reachable: the
one of --postgres DSN, else of $ACTORS_BENCH_POSTGRES_DSN or $ACTORS_TEST_POSTGRES_DSN. Each
store gets a schema of its own, dropped afterwards. Without a server its rows say "skipped".
Targets: at least 10,000 events/s (batches of 10, commits flushed to disk), restore within
0.3 s.

Fork (issue 28) is `store.fork` of a tree of 10 agents cut in the middle of the root's log
(best of 5, each into a new session), for trees of 10,000 and 100,000 events. Targets: the
10,000-event fork within 20 ms, the 100,000-event one within 2x of it (the prefix is shared,
not copied), on SQLite and Postgres.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from actors import (
    AgentContext,
    AssistantMessage,
    ContextUpdate,
    Event,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from actors.store import AgentRecord, MemoryStore, PostgresStore, SessionStore, SQLiteStore

APPEND_TARGET = 20_000.0
RESTORE_TARGET = 0.2
POSTGRES_APPEND_TARGET = 10_000.0
POSTGRES_RESTORE_TARGET = 0.3
FORK_TARGET = 0.020
FORK_GROWTH_TARGET = 2.0
FORK_AGENTS = 10
DSN_VARIABLES = ("ACTORS_BENCH_POSTGRES_DSN", "ACTORS_TEST_POSTGRES_DSN")


@dataclass(frozen=True)
class Result:
    measure: str
    store: str
    batch: int
    events: int
    seconds: float
    cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.events / self.seconds if self.seconds else float("inf")


@dataclass(frozen=True)
class Skipped:
    store: str
    reason: str


class Postgres:
    """Stores on one server, each in a schema of its own; `close` drops the schemas."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self._dsn = dsn
        self._schemas: list[str] = []
        with psycopg.connect(dsn, connect_timeout=5):  # reachable, or raise now
            pass

    def make(self) -> SessionStore:
        schema = f"bench_{os.getpid()}_{len(self._schemas)}"
        self._schemas.append(schema)
        return PostgresStore(self._dsn, schema=schema)

    def close(self) -> None:
        import psycopg

        with psycopg.connect(self._dsn, autocommit=True) as conn:
            for schema in self._schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # type: ignore[arg-type]


def open_postgres(dsn: str | None) -> Postgres | Skipped:
    """The server to measure, or why there is none."""
    dsn = dsn or next((os.environ[v] for v in DSN_VARIABLES if os.environ.get(v)), None)
    if not dsn:
        return Skipped("postgres", "no server (pass --postgres DSN)")
    try:
        return Postgres(dsn)
    except ImportError:
        return Skipped("postgres", "no driver (pip install 'actors[postgres]')")
    except Exception as exc:  # any failure to connect means the same here: nothing to measure
        return Skipped("postgres", f"no server ({type(exc).__name__})")


def transcript(agent_id: str, events: int) -> tuple[Event, ...]:
    """A realistic log of ``events`` events: steps with a model reply, a tool call and result."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    ticks = iter(range(1 << 40))
    ctx = AgentContext(
        agent_id,
        name="assistant",
        metadata={"user": "ada"},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
    )
    ctx.add_message(UserMessage(content="Plan a three-day trip to Lisbon. " * 4))
    step = 0
    while len(ctx.events) < events:
        step += 1
        ctx.increment_iteration()
        call = ToolCall(id=f"call-{step}", name="search", arguments={"q": f"lisbon {step}"})
        ctx.add_message(AssistantMessage(content=f"Looking up item {step}.", tool_calls=(call,)))
        ctx.add_usage(Usage(requests=1, input_tokens=900 + step, output_tokens=40))
        ctx.add_tool_call(call)
        ctx.add_message(
            ToolResultMessage(
                tool_call_id=call.id, tool_name="search", content=f"result {step}: " + "x" * 200
            )
        )
        ctx.apply_update(ContextUpdate().append("seen", step))
    return ctx.events[:events]


def prepared(store: SessionStore, session_id: str, agents: Sequence[str]) -> None:
    store.create_session(session_id, root_agent_id=agents[0])
    for position, agent_id in enumerate(agents):
        parent = None if position == 0 else agents[0]
        store.put_agent(session_id, AgentRecord(agent_id, parent, "assistant", "running", position))


def bench_append(
    make: Callable[[], SessionStore],
    label: str,
    events: int,
    batch: int,
    *,
    threads: int = 1,
    repeat: int = 1,
) -> Result:
    """Append ``events`` events in batches from ``threads`` threads; the best of ``repeat``."""
    agents = [f"agent-{n}" for n in range(threads)]
    per_thread = events // threads
    logs = {agent_id: transcript(agent_id, per_thread) for agent_id in agents}
    runs = []
    for _ in range(repeat):
        with make() as store:
            prepared(store, "bench", agents)
            start = threading.Barrier(threads + 1)

            def write(store: SessionStore, agent_id: str, start: threading.Barrier) -> None:
                log = logs[agent_id]
                start.wait()
                for first in range(0, len(log), batch):
                    store.append_events("bench", agent_id, log[first : first + batch])

            workers = [
                threading.Thread(target=write, args=(store, agent_id, start)) for agent_id in agents
            ]
            for worker in workers:
                worker.start()
            began, cpu = time.perf_counter(), time.process_time()
            start.wait()
            for worker in workers:
                worker.join()
            runs.append((time.perf_counter() - began, time.process_time() - cpu))
            assert sum(store.last_seq("bench", a) + 1 for a in agents) == threads * per_thread
    name = "append" if threads == 1 else f"append, {threads} threads"
    return Result(name, label, batch, threads * per_thread, *min(runs))


def bench_restore(
    make: Callable[[], SessionStore], label: str, agents: int, per_agent: int, repeat: int
) -> list[Result]:
    ids = ["root"] + [f"root-sub-{n}" for n in range(1, agents)]
    with make() as store:
        prepared(store, "restore", ids)
        for agent_id in ids:
            log = transcript(agent_id, per_agent)
            for first in range(0, per_agent, 500):
                store.append_events("restore", agent_id, log[first : first + 500])
        loads, totals = [], []
        for _ in range(repeat):
            began, cpu = time.perf_counter(), time.process_time()
            session = store.load("restore")
            loads.append((time.perf_counter() - began, time.process_time() - cpu))
            contexts = [AgentContext.deserialize(agent.context) for agent in session.agents]
            totals.append((time.perf_counter() - began, time.process_time() - cpu))
            assert sum(len(ctx.events) for ctx in contexts) == agents * per_agent
    shape = f"{agents} agent{'s' if agents > 1 else ''} x {per_agent}"
    return [
        Result(f"load ({shape})", label, 0, agents * per_agent, *min(loads)),
        Result(f"load + deserialize ({shape})", label, 0, agents * per_agent, *min(totals)),
    ]


def bench_fork(
    make: Callable[[], SessionStore], label: str, events: int, repeat: int
) -> Result:
    """``store.fork`` of a tree of `FORK_AGENTS` agents holding ``events`` events in all."""
    ids = ["root"] + [f"root-sub-{n}" for n in range(1, FORK_AGENTS)]
    per_agent = max(1, events // FORK_AGENTS)
    with make() as store:
        prepared(store, "tree", ids)
        for agent_id in ids:
            log = transcript(agent_id, per_agent)
            for first in range(0, per_agent, 1000):
                store.append_events("tree", agent_id, log[first : first + 1000])
        times = []
        for n in range(repeat):
            began, cpu = time.perf_counter(), time.process_time()
            store.fork("tree", f"fork-{n}", at=per_agent // 2, root_agent_id=f"fork-{n}")
            times.append((time.perf_counter() - began, time.process_time() - cpu))
        assert store.last_seq("fork-0", "fork-0") == per_agent // 2
    return Result(f"fork ({FORK_AGENTS} agents)", label, 0, per_agent * FORK_AGENTS, *min(times))


def run_postgres(smoke: bool, dsn: str | None) -> list[Result] | Skipped:
    server = open_postgres(dsn)
    if isinstance(server, Skipped):
        return server
    scale = 0.01 if smoke else 1.0

    def size(n: int) -> int:
        return max(20, int(n * scale))

    results: list[Result] = []
    try:
        repeat = 1 if smoke else 3
        results.append(bench_append(server.make, "postgres", size(10_000), 10, repeat=repeat))
        results.append(bench_append(server.make, "postgres", size(1_000), 1, repeat=repeat))
        results.append(
            bench_append(server.make, "postgres", size(20_000), 10, threads=8, repeat=repeat)
        )
        for agents, per_agent in [(1, 10_000), (10, 1_000)]:
            n = max(1, int(per_agent * scale))
            results += bench_restore(server.make, "postgres", agents, n, 1 if smoke else 5)
        for events in (10_000, 100_000):
            results.append(bench_fork(server.make, "postgres", size(events), 5))
    finally:
        server.close()
    return results


def run(smoke: bool) -> list[Result]:
    folder = tempfile.TemporaryDirectory(prefix="actors-bench-")
    counter = iter(range(1 << 30))

    def sqlite(durability: str) -> Callable[[], SessionStore]:
        def make() -> SessionStore:
            path = Path(folder.name) / f"bench-{next(counter)}.db"
            return SQLiteStore(path, durability=durability)  # type: ignore[arg-type]

        return make

    scale = 0.01 if smoke else 1.0

    def size(n: int) -> int:
        return max(20, int(n * scale))

    results: list[Result] = []
    try:
        repeat = 1 if smoke else 3
        for label, make, batched, single in [
            ("sqlite batch", sqlite("batch"), 20_000, 5_000),
            ("sqlite sync", sqlite("sync"), 3_000, 500),
            ("memory", MemoryStore, 20_000, 10_000),
        ]:
            results.append(bench_append(make, label, size(batched), 10, repeat=repeat))
            results.append(bench_append(make, label, size(single), 1, repeat=repeat))
        results.append(
            bench_append(
                sqlite("batch"), "sqlite batch", size(20_000), 10, threads=8, repeat=repeat
            )
        )
        for agents, per_agent in [(1, 10_000), (10, 1_000)]:
            n = max(1, int(per_agent * scale))
            results += bench_restore(sqlite("batch"), "sqlite", agents, n, 1 if smoke else 5)
        for events in (10_000, 100_000):
            results.append(bench_fork(sqlite("batch"), "sqlite", size(events), 5))
            results.append(bench_fork(MemoryStore, "memory", size(events), 5))
    finally:
        folder.cleanup()
    return results


def table(results: Sequence[Result], skipped: Sequence[Skipped] = ()) -> str:
    lines = [
        "| measure | store | batch | events | seconds | cpu s | events/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        batch = str(r.batch) if r.batch else "-"
        lines.append(
            f"| {r.measure} | {r.store} | {batch} | {r.events:,} | {r.seconds:.4f} "
            f"| {r.cpu_seconds:.4f} | {r.per_second:,.0f} |"
        )
    for skip in skipped:
        lines.append(f"| append, restore | {skip.store} | - | - | - | - | skipped: {skip.reason} |")
    return "\n".join(lines)


def _verdicts_of(
    results: Sequence[Result],
    labels: tuple[str, str],
    store: str,
    append_target: float,
    restore_target: float,
) -> list[str]:
    label, restore_label = labels
    appended = next(r for r in results if r.measure == "append" and r.store == store)
    restores = [
        r for r in results if r.measure.startswith("load + deserialize") and r.store in store
    ]
    met = appended.per_second >= append_target
    lines = [
        f"- {label}, {appended.batch}-event batches: {appended.per_second:,.0f} events/s "
        f"(target >= {append_target:,.0f}): {'met' if met else 'MISSED'}"
    ]
    for r in restores:
        ok = r.seconds <= restore_target
        lines.append(
            f"- {restore_label}, {r.measure}: {r.seconds:.3f} s (target <= {restore_target} s): "
            f"{'met' if ok else 'MISSED'}"
        )
    return lines


def verdicts(results: Sequence[Result], skipped: Sequence[Skipped] = ()) -> list[str]:
    lines = _verdicts_of(
        results, ("batch mode", "restore"), "sqlite batch", APPEND_TARGET, RESTORE_TARGET
    )
    if any(r.store == "postgres" for r in results):
        lines += _verdicts_of(
            results,
            ("postgres", "postgres restore"),
            "postgres",
            POSTGRES_APPEND_TARGET,
            POSTGRES_RESTORE_TARGET,
        )
    for store in ("sqlite", "postgres"):
        forks = sorted(
            (r for r in results if r.measure.startswith("fork") and r.store == store),
            key=lambda r: r.events,
        )
        if len(forks) == 2:
            small, large = forks
            growth = large.seconds / small.seconds if small.seconds else float("inf")
            lines.append(
                f"- {store} fork, {small.events:,} events: {small.seconds * 1000:.1f} ms "
                f"(target <= {FORK_TARGET * 1000:.0f} ms): "
                f"{'met' if small.seconds <= FORK_TARGET else 'MISSED'}; {large.events:,} "
                f"events: {large.seconds * 1000:.1f} ms, {growth:.2f}x (target <= "
                f"{FORK_GROWTH_TARGET:.0f}x): {'met' if growth <= FORK_GROWTH_TARGET else 'MISSED'}"
            )
    lines += [f"- {skip.store}: skipped: {skip.reason}" for skip in skipped]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check it runs")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        help=f"the PostgreSQL server to measure (default: ${' or $'.join(DSN_VARIABLES)})",
    )
    args = parser.parse_args(argv)
    results = run(args.smoke)
    postgres = run_postgres(args.smoke, args.postgres)
    skipped = [postgres] if isinstance(postgres, Skipped) else []
    results += [] if isinstance(postgres, Skipped) else postgres
    print(table(results, skipped))
    print()
    print("\n".join(verdicts(results, skipped)))
    if args.json:
        payload = {
            "smoke": args.smoke,
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "results": [asdict(r) | {"events_per_second": r.per_second} for r in results],
            "skipped": [asdict(skip) for skip in skipped],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
