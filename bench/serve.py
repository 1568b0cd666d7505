"""Serving: many concurrent streamed runs over HTTP, and a request to a cold stored session.

    .venv/bin/python -m bench.serve [--quick] [--json PATH]
    .venv/bin/python -m bench.serve --streams 1000 --stored 100000

One process: the app (`actors.serve.create_app`) under uvicorn on a loopback port in a thread,
and the client (httpx, asyncio) in the main thread, so the figures include the client's share
of the same two cores. The model is a scripted function (no latency): what is measured is the
server.

Concurrent streams: N sessions run at once, each a ``POST .../runs`` on a connection of its
own, read to its ``run_ended`` as server-sent events (a plain asyncio client: httpx's pool of
a thousand connections costs more than the server); the baseline is the same N runs started
with ``ref.run_async`` on a plain `Runtime` in the same process. Reported: each run's latency
(p50, p99) both ways and the difference, streamed runs per second, one run at a time too;
threads and RSS with the server warm, with N idle sessions, and while the N streams run (idle
sessions must add no thread).

Cold sessions: S sessions are stored (one run each) in SQLite by a runtime that then stops;
a new server on the same file answers a run on a random one of them (it is woken from the
store). Reported: the median and p99 of that request, a warm session's request for
comparison. Target (issue 27): a cold one answers in <= 20 ms plus the model.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import finish, fmt_time, parser, rss_bytes

FULL_STREAMS, QUICK_STREAMS = 1_000, 20
FULL_STORED, QUICK_STORED = 100_000, 200
COLD_SAMPLES = 50
COLD_TARGET = 0.020
REPLY = "Hello! This reply streams in pieces, as a provider would send it."


def spec() -> Any:
    from actors import Agent
    from actors.testing import FunctionModel

    async def reply(_messages: Any, _tools: Any) -> str:  # on the loop: no thread per reply
        return REPLY

    return Agent("assistant", model=FunctionModel(reply, chunk_size=16, history=0))


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Served:
    """The app under uvicorn on a free loopback port, in a thread."""

    def __init__(self, app: Any) -> None:
        import socket

        import uvicorn

        # IPPROTO_TCP, as asyncio's own listeners: it sets TCP_NODELAY only on sockets that
        # say so, and without it each response waits ~40 ms on Nagle and delayed ACKs.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(2048)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="error", backlog=2048)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def __enter__(self) -> Served:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        self.sock.close()


async def raw_stream_run(address: tuple[str, int], session_id: str) -> float:
    """One streamed run over a connection of its own (a browser tab), read to its end.

    Plain asyncio rather than httpx: a pool of a thousand connections in httpx costs the
    shared cores more than the server does, and would be measured as the server's.
    """
    body = b'{"prompt": "hi"}'
    request = (
        f"POST /sessions/{session_id}/runs HTTP/1.1\r\nHost: bench\r\n"
        "Accept: text/event-stream\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    began = time.perf_counter()
    reader, writer = await asyncio.open_connection(*address)
    writer.write(request)
    received = b""
    while b"event: run_ended" not in received:
        chunk = await reader.read(65536)
        assert chunk, f"the stream ended without its run_ended event: {received[-300:]!r}"
        received += chunk
    took = time.perf_counter() - began
    writer.close()
    return took


async def stream_run(client: Any, session_id: str) -> float:
    """One streamed run, read to its last event; its latency."""
    began = time.perf_counter()
    async with client.stream(
        "POST",
        f"/sessions/{session_id}/runs",
        json={"prompt": "hi"},
        headers={"accept": "text/event-stream"},
    ) as response:
        ended = False
        async for line in response.aiter_lines():  # to the end: the connection is kept
            ended = ended or line == "event: run_ended"
        assert ended, "the stream ended without its run_ended event"
    return time.perf_counter() - began


async def served_runs(url: str, count: int) -> dict[str, Any]:
    import httpx

    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        # Warm up: the server's thread pool and a few sessions.
        warm = [(await client.post("/sessions", json={})).json()["session_id"] for _ in range(50)]
        await asyncio.gather(*(stream_run(client, sid) for sid in warm))
        threads_warm, rss_warm = threading.active_count(), rss_bytes()
        sessions = []
        for _ in range(count):
            sessions.append((await client.post("/sessions", json={})).json()["session_id"])
        threads_idle, rss_idle = threading.active_count(), rss_bytes()
        one_at_a_time = [await stream_run(client, sid) for sid in sessions[:50]]
        peak_threads = [threads_idle]

        async def watch() -> None:
            while True:
                peak_threads.append(threading.active_count())
                await asyncio.sleep(0.05)

        watcher = asyncio.create_task(watch())
        host, port = url.removeprefix("http://").split(":")
        address = (host, int(port))
        began = time.perf_counter()
        latencies = await asyncio.gather(*(raw_stream_run(address, sid) for sid in sessions))
        wall = time.perf_counter() - began
        watcher.cancel()
        rss_busy = rss_bytes()
    return {
        "latencies": list(latencies),
        "one_at_a_time": one_at_a_time,
        "wall_s": wall,
        "threads_warm": threads_warm,
        "threads_idle": threads_idle,
        "threads_busy_peak": max(peak_threads),
        "rss_warm": rss_warm,
        "rss_idle": rss_idle,
        "rss_busy": rss_busy,
    }


def direct_runs(count: int) -> dict[str, Any]:
    """The same runs with ``ref.run_async`` on a plain runtime: the baseline."""
    from actors import Runtime
    from actors.store import MemoryStore

    agent = spec()
    with Runtime() as runtime, MemoryStore() as store:
        refs = [
            runtime.open_session(agent, session_id=f"d{i}", store=store) for i in range(count + 50)
        ]
        one = []
        for ref in refs[count:]:
            began = time.perf_counter()
            ref.run("hi")
            one.append(time.perf_counter() - began)
        ends: list[float] = [0.0] * count
        done = threading.Semaphore(0)

        def ended(i: int) -> Any:
            def callback(_f: Any) -> None:
                ends[i] = time.perf_counter()
                done.release()

            return callback

        began = time.perf_counter()
        for i, ref in enumerate(refs[:count]):
            ref.run_async("hi").add_done_callback(ended(i))
        for _ in range(count):
            done.acquire()
    return {"latencies": [end - began for end in ends], "one_at_a_time": one}


def concurrency(count: int, folder: Path) -> dict[str, Any]:
    from actors.serve import create_app
    from actors.store import SQLiteStore

    direct = direct_runs(count)
    with SQLiteStore(folder / "streams.sqlite") as store:
        app = create_app(spec(), store, rate_limit=None, idle_after=None, page=False)
        with Served(app) as served:
            over_http = asyncio.run(served_runs(served.url, count))
    served_lat, direct_lat = over_http["latencies"], direct["latencies"]
    one_served = statistics.median(over_http["one_at_a_time"])
    one_direct = statistics.median(direct["one_at_a_time"])
    return {
        "streams": count,
        "served_p50_s": percentile(served_lat, 0.5),
        "served_p99_s": percentile(served_lat, 0.99),
        "direct_p50_s": percentile(direct_lat, 0.5),
        "direct_p99_s": percentile(direct_lat, 0.99),
        "added_p50_s": percentile(served_lat, 0.5) - percentile(direct_lat, 0.5),
        "added_p99_s": percentile(served_lat, 0.99) - percentile(direct_lat, 0.99),
        "one_served_s": one_served,
        "one_direct_s": one_direct,
        "one_added_s": one_served - one_direct,
        "wall_s": over_http["wall_s"],
        "runs_per_s": count / over_http["wall_s"],
        **{k: over_http[k] for k in over_http if k.startswith(("threads_", "rss_"))},
    }


def store_sessions(count: int, path: Path) -> float:
    """Store ``count`` sessions, one run each, as a server would have; seconds it took."""
    from actors import Runtime
    from actors.store import SQLiteStore

    agent = spec()
    window = threading.BoundedSemaphore(max(1, min(500, count // 20)))
    began = time.perf_counter()
    with SQLiteStore(path) as store, Runtime(idle_after=0) as runtime:
        for i in range(count):
            window.acquire()
            ref = runtime.open_session(agent, session_id=f"user-{i}", store=store)
            ref.run_async("hi").add_done_callback(lambda _f: window.release())
        for _ in range(max(1, min(500, count // 20))):
            window.acquire()
    return time.perf_counter() - began


def cold(count: int, path: Path) -> dict[str, Any]:
    import httpx

    from actors.serve import create_app
    from actors.store import SQLiteStore

    stored_s = store_sessions(count, path)
    picks = random.Random(7).sample(range(count), min(COLD_SAMPLES, count))
    with SQLiteStore(path) as store:
        app = create_app(spec(), store, rate_limit=None, idle_after=None, page=False)
        with Served(app) as served, httpx.Client(base_url=served.url, timeout=60) as client:
            client.get("/healthz")
            warm_id = f"user-{picks[0]}"
            client.post(f"/sessions/{warm_id}/runs", json={"prompt": "warm up"})
            woken, warm, views = [], [], []
            for i in picks[1:]:
                began = time.perf_counter()
                client.get(f"/sessions/user-{i}")
                views.append(time.perf_counter() - began)
                began = time.perf_counter()
                answer = client.post(f"/sessions/user-{i}/runs", json={"prompt": "again"})
                woken.append(time.perf_counter() - began)
                assert (answer.json()["result"] or {}).get("status") == "completed", answer.text
                began = time.perf_counter()
                client.post(f"/sessions/{warm_id}/runs", json={"prompt": "again"})
                warm.append(time.perf_counter() - began)
    return {
        "stored": count,
        "store_s": stored_s,
        "cold_p50_s": statistics.median(woken),
        "cold_p99_s": percentile(woken, 0.99),
        "warm_p50_s": statistics.median(warm),
        "view_p50_s": statistics.median(views),
        "target_s": COLD_TARGET,
    }


def measure(quick: bool, streams: int | None, stored: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="actors-serve-") as name:
        folder = Path(name)
        crowd = concurrency(streams or (QUICK_STREAMS if quick else FULL_STREAMS), folder)
        wake = cold(stored or (QUICK_STORED if quick else FULL_STORED), folder / "cold.sqlite")
    return {"quick": quick, "concurrency": crowd, "cold": wake}


def report(r: dict[str, Any]) -> str:
    c, w = r["concurrency"], r["cold"]
    met = "met" if w["cold_p50_s"] <= COLD_TARGET else "MISSED"
    return "\n".join(
        [
            f"{c['streams']:,} concurrent streamed runs over HTTP: p50 "
            f"{fmt_time(c['served_p50_s'])}, p99 {fmt_time(c['served_p99_s'])} (direct "
            f"ref.run_async: p50 {fmt_time(c['direct_p50_s'])}, p99 "
            f"{fmt_time(c['direct_p99_s'])}); added p50 {fmt_time(c['added_p50_s'])}, p99 "
            f"{fmt_time(c['added_p99_s'])}; wall {fmt_time(c['wall_s'])} "
            f"({c['runs_per_s']:,.0f} streamed runs/s)",
            f"one run at a time: served {fmt_time(c['one_served_s'])}, direct "
            f"{fmt_time(c['one_direct_s'])}, added {fmt_time(c['one_added_s'])}",
            f"threads: warm {c['threads_warm']}, with {c['streams']:,} idle sessions "
            f"{c['threads_idle']}, peak while streaming {c['threads_busy_peak']}; RSS warm "
            f"{c['rss_warm'] / 1024**2:,.0f} MiB, idle {c['rss_idle'] / 1024**2:,.0f} MiB, "
            f"after streaming {c['rss_busy'] / 1024**2:,.0f} MiB",
            f"cold session among {w['stored']:,} stored (made in {w['store_s']:.0f} s): a run "
            f"answers in {fmt_time(w['cold_p50_s'])} p50, {fmt_time(w['cold_p99_s'])} p99 "
            f"(warm {fmt_time(w['warm_p50_s'])}; a view {fmt_time(w['view_p50_s'])}); "
            f"target <= 20 ms plus the model: {met}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--streams", type=int, help="concurrent streamed runs (default 1,000)")
    p.add_argument("--stored", type=int, help="stored sessions (default 100,000)")
    args = p.parse_args(argv)
    result = measure(args.quick, args.streams, args.stored)
    return finish(result, args.json, lambda: report(result))


if __name__ == "__main__":
    sys.exit(main())
