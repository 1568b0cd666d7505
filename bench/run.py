"""Run every benchmark, print one markdown report, write the figures as JSON.

    .venv/bin/python -m bench                 # everything, peers included (from the repo root)
    .venv/bin/python -m bench --quick         # tiny sizes: checks that it all runs
    .venv/bin/python -m bench --no-peers      # actors only (RayRuntime's section needs ray)

Each section runs in a fresh interpreter (a crash or a leak in one cannot skew another) and
writes its figures to a temporary JSON file. The peers run in their own venv,
bench/.peers-venv, created here from bench/requirements-peers.txt and never mixed with the
project's. A section or a peer that fails becomes a row that says so; the run goes on.
Ratios are against baselines measured in this same run: absolute times on a shared 2-core
machine drift 2x from run to run, ratios hold. To keep drift out of the ratios, actors' per-run
figures and the peers' are measured in three interleaved rounds (median of the rounds), and
the hop and the raw ask in alternating blocks.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if not __package__:  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BENCH, ROOT, fmt_time, machine
from bench.peers import DISTRIBUTIONS, FRAMEWORKS
from bench.real_models import render as render_http
from bench.sim import render as render_sim
from bench.sim_http import render as render_sim_http

PEERS_VENV = BENCH / ".peers-venv"
REQUIREMENTS = BENCH / "requirements-peers.txt"
# Which pinned distributions each peer needs (the rest of the file is shared by none).
PEER_REQUIREMENTS = {
    "pydantic-ai": ("pydantic-ai-slim",),
    "openai-agents": ("openai-agents",),
    "langgraph": ("langgraph", "langchain-core"),
}
PEER_OVER_ACTORS_TARGET = 3.0  # issue 9: actors <= 1/3 of the fastest peer


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- sections -------------------------------------------------------------------------------


def run_section(
    name: str, command: Sequence[str], timeout: float, json_flag: str = "--json"
) -> dict[str, Any]:
    """Run one section in a fresh interpreter; its figures, or ``{"error": ...}``."""
    log(f"## {name}: {' '.join(command[1:])}")
    with tempfile.TemporaryDirectory(prefix="actors-bench-") as folder:
        out = Path(folder) / "out.json"
        began = time.perf_counter()
        try:
            done = subprocess.run(
                [*command, json_flag, str(out)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:g} s"}
        seconds = time.perf_counter() - began
        if done.stdout.strip():
            log(done.stdout.rstrip())
        if done.returncode != 0 or not out.exists():
            tail = [line for line in done.stderr.strip().splitlines() if line.strip()][-1:]
            error = tail[0] if tail else f"exit code {done.returncode}"
            log(f"   failed: {error}")
            return {"error": error[:300]}
        figures = dict(json.loads(out.read_text()))
        figures["section_s"] = seconds
        return figures


def actors_section(
    module: str, quick: bool, timeout: float, extra: Sequence[str] = ()
) -> dict[str, Any]:
    command = [sys.executable, "-m", f"bench.{module}", *(["--quick"] if quick else []), *extra]
    return run_section(module, command, timeout)


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One section's figures from several rounds: the median of each number."""
    good = [r for r in rounds if "error" not in r]
    if not good:
        return rounds[0] if rounds else {"error": "not run"}
    out = dict(good[0])
    for key, value in good[0].items():
        values = [r.get(key) for r in good]
        if isinstance(value, float) and all(isinstance(v, int | float) for v in values):
            out[key] = statistics.median(values)
    out["rounds"] = len(good)
    if len(good) < len(rounds):
        out["failed_rounds"] = [r["error"] for r in rounds if "error" in r]
    return out


def store_section(quick: bool) -> dict[str, Any]:
    """bench/store.py (the persistence issue's benchmark), if it is there."""
    script = BENCH / "store.py"
    if not script.exists():
        return {"error": "bench/store.py is not there yet"}
    command = [sys.executable, str(script)] + (["--smoke"] if quick else [])
    figures = run_section("store", command, timeout=900)
    if "error" in figures:
        return figures
    results = figures.get("results", [])

    def find(measure: str, store: str, batch: int) -> Any:
        for row in results:
            if (row.get("measure"), row.get("store"), row.get("batch")) == (measure, store, batch):
                return row
        return None

    append = find("append", "sqlite batch", 10)
    durable = find("append", "sqlite sync", 10)
    restore = next(
        (
            r
            for r in results
            if r.get("store") == "sqlite"
            and str(r.get("measure", "")).startswith("load + deserialize (1 ")
        ),
        None,
    )
    pg_append = find("append", "postgres", 10)
    pg_restore = next(
        (
            r
            for r in results
            if r.get("store") == "postgres"
            and str(r.get("measure", "")).startswith("load + deserialize (1 ")
        ),
        None,
    )
    skipped = next((s for s in figures.get("skipped", []) if s.get("store") == "postgres"), None)
    figures["summary"] = {
        "events_per_s_batch": append and append.get("events_per_second"),
        "events_per_s_sync": durable and durable.get("events_per_second"),
        "restore_s": restore and restore.get("seconds"),
        "restore_events": restore and restore.get("events"),
        "postgres_events_per_s": pg_append and pg_append.get("events_per_second"),
        "postgres_restore_s": pg_restore and pg_restore.get("seconds"),
        "postgres_skipped": skipped and skipped.get("reason"),
    }
    return figures


# -- peers ----------------------------------------------------------------------------------


def pinned() -> dict[str, str]:
    """Distribution name -> requirement line, from bench/requirements-peers.txt."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name = line.split("==", 1)[0].split(">", 1)[0].split("<", 1)[0].strip().lower()
            pins[name] = line
    return pins


def peers_python() -> Path:
    return PEERS_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_peers_venv() -> dict[str, str]:
    """Create or refresh bench/.peers-venv; returns install errors by framework."""
    stamp = PEERS_VENV / ".requirements-sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if peers_python().exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return {}
    log(f"## peers: installing {REQUIREMENTS.name} into {PEERS_VENV.relative_to(ROOT)}")
    if not peers_python().exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(PEERS_VENV)
    pip = [str(peers_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    everything = subprocess.run(
        [*pip, "-r", str(REQUIREMENTS)], capture_output=True, text=True, timeout=1800
    )
    errors: dict[str, str] = {}
    if everything.returncode != 0:  # one peer may be the culprit: install each on its own
        pins = pinned()
        for framework, names in PEER_REQUIREMENTS.items():
            lines = [pins[name] for name in names if name in pins]
            one = subprocess.run([*pip, *lines], capture_output=True, text=True, timeout=1800)
            if one.returncode != 0:
                problems = [x for x in one.stderr.splitlines() if x.startswith("ERROR")]
                errors[framework] = (problems[-1] if problems else "pip install failed")[:300]
    if not errors:
        stamp.write_text(wanted + "\n")
    return errors


def per_run(quick: bool, with_peers: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The per-run overhead of actors and of each peer, measured in interleaved rounds.

    Absolute times on a shared machine drift during a run; measuring actors and the peers in
    turns (each round at a fraction of the full sizes, the order rotated from one round to the
    next) and taking the median of the rounds keeps the drift out of their ratios.
    """
    rounds = 1 if quick else 3
    fraction = ["--fraction", f"{1 / rounds:.4f}"] if rounds > 1 else []
    install_errors: dict[str, str] = {}
    if with_peers:
        try:
            install_errors = ensure_peers_venv()
        except (OSError, subprocess.SubprocessError) as exc:
            install_errors = {f: f"could not create the peers venv: {exc}" for f in FRAMEWORKS}
    contenders = ["actors", *(FRAMEWORKS if with_peers else ())]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in contenders}
    for r in range(rounds):
        order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for name in order:
            if name == "actors":
                results[name].append(
                    actors_section("run_overhead", quick, timeout=1200, extra=fraction)
                )
            elif name in install_errors:
                results[name].append({"error": f"not installed: {install_errors[name]}"})
            else:
                command = [str(peers_python()), "-m", "bench.peers", "--framework", name]
                command += ["--quick"] if quick else fraction
                results[name].append(run_section(f"peer {name}", command, timeout=900))
    overhead = combine(results.pop("actors"))
    if not with_peers:
        return overhead, None
    peers = {name: combine(rows) for name, rows in results.items()}
    for name, peer in peers.items():
        peer.setdefault("distribution", DISTRIBUTIONS[name])
    return overhead, peers


# -- the report -----------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "**missed**")


def get(section: dict[str, Any], key: str) -> Any:
    return None if "error" in section else section.get(key)


def time_or_error(section: dict[str, Any], key: str) -> str:
    if "error" in section:
        return f"failed: {section['error']}"
    value = section.get(key)
    return fmt_time(value) if isinstance(value, int | float) else "-"


def render(results: dict[str, Any]) -> str:
    s = results["sections"]
    ov, fan, scale, imp, store = (
        s["overhead"],
        s["fanout"],
        s["scale"],
        s["imports"],
        s["store"],
    )
    growth = s.get("growth") or {"error": "not run"}
    peer_rows = s.get("peers") or {}
    ok_peers = {f: p for f, p in peer_rows.items() if "error" not in p}
    fastest_seq = min(ok_peers.items(), key=lambda kv: kv[1]["run_s"], default=None)
    fastest_wide = min(ok_peers.items(), key=lambda kv: kv[1]["run_concurrent_s"], default=None)

    lines = [f"### Summary ({'quick sizes' if results['quick'] else 'full sizes'})", ""]
    lines += ["| measure | actors | baseline (same run) | actors ÷ baseline | target | verdict |"]
    lines += ["| --- | ---: | --- | ---: | --- | --- |"]
    ask, hop = get(ov, "raw_ask_s"), get(ov, "hop_s")
    lines.append(
        f"| message hop (status query to an agent actor) | {time_or_error(ov, 'hop_s')} "
        f"| raw pykka ask {time_or_error(ov, 'raw_ask_s')} | {ratio(hop, ask)} | <= 1.5x ask "
        f"| {verdict(None if not hop or not ask else hop / ask <= 1.5)} |"
    )
    run = get(ov, "run_fresh_s")
    if fastest_seq:
        base = f"{fastest_seq[0]} {fmt_time(fastest_seq[1]['run_s'])}"
        peer_ok = None if not run else fastest_seq[1]["run_s"] / run >= PEER_OVER_ACTORS_TARGET
    else:
        base, peer_ok = "no peer measured", None
    lines.append(
        f"| one run, sequential (1 tool call + answer) | {time_or_error(ov, 'run_fresh_s')} "
        f"| fastest peer: {base} | {ratio(run, fastest_seq[1]['run_s'] if fastest_seq else None)} "
        f"| <= 0.8 ms; <= 1/3 of fastest peer | {verdict(None if not run else run <= 0.8e-3)}; "
        f"{verdict(peer_ok)} |"
    )
    wide = get(ov, "run_concurrent_s")
    if fastest_wide:
        base = f"{fastest_wide[0]} {fmt_time(fastest_wide[1]['run_concurrent_s'])}"
        wide_base = fastest_wide[1]["run_concurrent_s"]
    else:
        base, wide_base = "no peer measured", None
    width = get(ov, "concurrency") or 100
    lines.append(
        f"| one run, {width} at once (wall / {width}) | {time_or_error(ov, 'run_concurrent_s')} "
        f"| fastest peer: {base} | {ratio(wide, wide_base)} | <= 1/3 of fastest peer "
        f"| {verdict(None if not wide or not wide_base else wide_base / wide >= 3)} |"
    )
    budgeted, plain = get(ov, "run_budgeted_s"), get(ov, "run_plain_s")
    lines.append(
        f"| one run with a budget (each request reserved, priced, settled) "
        f"| {time_or_error(ov, 'run_budgeted_s')} "
        f"| the same run without {time_or_error(ov, 'run_plain_s')} "
        f"| {ratio(budgeted, plain)} | <= 1.10x "
        f"| {verdict(None if not budgeted or not plain else budgeted / plain <= 1.10)} |"
    )
    wall = get(fan, "wall_s")
    children = get(fan, "children") or 1000
    lines.append(
        f"| fan-out: {children:,} children, {fmt_time(get(fan, 'latency_s') or 0.2)} model wait "
        f"| {time_or_error(fan, 'wall_s')} wall | ideal {fmt_time(get(fan, 'latency_s') or 0.2)} "
        f"| overlap {get(fan, 'overlap') or 0:.0f}x | <= 1.2 s "
        f"| {verdict(None if wall is None else wall <= 1.2)} |"
    )
    marks = [str(m) for m in get(growth, "marks") or []]
    if marks:
        at = growth["runtime_s"]
        grow = growth["runtime_ratio"]
        lines.append(
            f"| one agent reused: run {marks[-1]} vs run {marks[0]} (transcript grows) "
            f"| {fmt_time(at[marks[-1]])} | run {marks[0]}: {fmt_time(at[marks[0]])} "
            f"| {grow:.2f}x | <= {growth['target_ratio']:g}x "
            f"| {verdict(grow <= growth['target_ratio'])} |"
        )
    else:
        lines.append(
            f"| one agent reused, cost as it grows | failed: {growth.get('error')} | | | | |"
        )
    rows = get(scale, "rows") or []
    biggest = max((r for r in rows if r.get("spawned")), key=lambda r: r["agents"], default=None)
    if biggest:
        rss = biggest["rss_bytes"]
        lines.append(
            f"| {biggest['spawned']:,} live idle agents: memory | {rss / 1024**2:,.0f} MiB RSS "
            f"| - | - | <= 1 GiB (at 100,000) | {verdict(rss <= 1024**3)} |"
        )
        threads = {r["threads"] for r in rows if r.get("spawned")}
        lines.append(
            f"| threads added by the agents, {rows[0]['agents']:,} to {biggest['agents']:,} "
            f"| {', '.join(str(n) for n in sorted(threads))} | - | - | independent of the count "
            f"| {verdict(len(threads) == 1)} |"
        )
    else:
        lines.append(
            f"| live idle agents: memory | failed: {scale.get('error', 'no rows')} | | | | |"
        )
    kept = s.get("retention") or {"error": "not run"}
    cyc, ses = get(kept, "cycles"), get(kept, "session")
    if cyc and ses:
        grown = cyc["grown_bytes"]
        lines.append(
            f"| {cyc['cycles']:,} spawn/run/stop cycles in one runtime | "
            f"{grown / 1024**2:+.1f} MiB after cycle {cyc['baseline_at']:,} | - | - "
            f"| flat (< 8 MiB) | {verdict(grown < 8 * 1024**2)} |"
        )
        early, late = ses["early_bytes_per_run"], ses["late_bytes_per_run"]
        lines.append(
            f"| one agent, {ses['runs']:,} runs: memory per run, late | "
            f"{late / 1024:.1f} KiB | early {early / 1024:.1f} KiB | "
            f"{ratio(late, early)} | the same late as early (<= 1.5x) "
            f"| {verdict(early > 0 and late / early <= 1.5)} |"
        )
    else:
        lines.append(f"| retention | failed: {kept.get('error')} | | | | |")
    squeeze = s.get("compaction") or {"error": "not run"}
    late, whole = get(squeeze, "session"), get(squeeze, "all_in_view")
    if late and whole:
        median = late["median_s"]
        lines.append(
            f"| compaction overhead, {late['logged_messages']:,}-message session "
            f"(summarizer aside) | {fmt_time(median)} median, {fmt_time(late['max_s'])} worst "
            f"| all {squeeze['messages']:,} in view: {fmt_time(whole['total_s'])} | - "
            f"| <= 1 ms | {verdict(median == median and median <= squeeze['target_s'])} |"
        )
    else:
        lines.append(f"| compaction | failed: {squeeze.get('error')} | | | | |")
    shots = s.get("parts") or {"error": "not run"}
    if "payload_ratio" in shots:
        with_parts, as_text = shots["parts"], shots["text"]
        lines.append(
            f"| {shots['messages']} screenshots in an SQLite log: event payloads | "
            f"{with_parts['payload_bytes'] / 1e6:.2f} MB, load {fmt_time(with_parts['load_s'])} "
            f"| as text: {as_text['payload_bytes'] / 1e6:.2f} MB, "
            f"load {fmt_time(as_text['load_s'])} | {shots['payload_ratio']:.2%} | <= 1 % "
            f"| {verdict(shots['payload_ratio'] <= shots['target_ratio'])} |"
        )
    else:
        lines.append(f"| parts | failed: {shots.get('error')} | | | | |")
    virt = s.get("virtual") or {"error": "not run"}
    crowd, wake = get(virt, "sessions"), get(virt, "activation")
    if crowd and wake:
        peak = crowd["peak_rss_bytes"]
        lines.append(
            f"| {crowd['sessions']:,} virtual agents over SQLite, 1% in flight | "
            f"{peak / 1024**2:,.0f} MiB peak RSS; {crowd['runs_per_s']:,.0f} runs/s | - | - "
            f"| <= 2 GiB | {verdict(peak <= 2 * 1024**3)} |"
        )
        for row in wake.get("rows") or []:
            snap, whole = row["snapshot"], row["whole_log"]
            lines.append(
                f"| activation of a passivated assistant ({row['events']:,} events) "
                f"| {fmt_time(snap['activation_s'])} | folding its whole log "
                f"{fmt_time(whole['activation_s'])} | - | <= 5 ms, flat "
                f"| {verdict(snap['activation_s'] <= 0.005)} |"
            )
    else:
        lines.append(f"| virtual agents | failed: {virt.get('error')} | | | | |")
    served = s.get("serve") or {"error": "not run"}
    crowd, wake = get(served, "concurrency"), get(served, "cold")
    if crowd and wake:
        lines.append(
            f"| {crowd['streams']:,} concurrent streamed runs over HTTP (actors serve) "
            f"| p50 {fmt_time(crowd['served_p50_s'])}, p99 {fmt_time(crowd['served_p99_s'])} "
            f"| direct run_async p50 {fmt_time(crowd['direct_p50_s'])}, p99 "
            f"{fmt_time(crowd['direct_p99_s'])} | added p50 {fmt_time(crowd['added_p50_s'])} "
            f"| idle sessions add no thread ({crowd['threads_warm']} -> "
            f"{crowd['threads_idle']}) "
            f"| {verdict(crowd['threads_idle'] <= crowd['threads_warm'])} |"
        )
        lines.append(
            f"| a run on a cold session among {wake['stored']:,} stored (HTTP) "
            f"| {fmt_time(wake['cold_p50_s'])} | warm {fmt_time(wake['warm_p50_s'])} | - "
            f"| <= 20 ms + the model | {verdict(wake['cold_p50_s'] <= 0.020)} |"
        )
    else:
        lines.append(f"| serving | failed: {served.get('error')} | | | | |")
    best = get(imp, "best_s")
    lines.append(
        f"| `import actors`, fresh interpreter | {time_or_error(imp, 'best_s')} | - | - "
        f"| <= 0.3 s | {verdict(None if best is None else best <= 0.3)} |"
    )
    summary = store.get("summary") if "error" not in store else None
    if summary:
        eps = summary.get("events_per_s_batch")
        restore = summary.get("restore_s")
        lines.append(
            f"| store: durable appends (SQLite, batches of 10) | {eps or 0:,.0f} events/s | - "
            f"| - | >= 20,000/s | {verdict(None if eps is None else eps >= 20_000)} |"
        )
        lines.append(
            f"| store: restore {summary.get('restore_events') or 0:,} events "
            f"| {fmt_time(restore) if restore else '-'} | - | - | <= 0.2 s "
            f"| {verdict(None if restore is None else restore <= 0.2)} |"
        )
        if summary.get("postgres_skipped"):
            lines.append(f"| store: Postgres | skipped: {summary['postgres_skipped']} | | | | |")
        else:
            pg_eps = summary.get("postgres_events_per_s")
            pg_restore = summary.get("postgres_restore_s")
            lines.append(
                f"| store: durable appends (Postgres over loopback, batches of 10) "
                f"| {pg_eps or 0:,.0f} events/s | SQLite sync "
                f"{summary.get('events_per_s_sync') or 0:,.0f}/s | - | >= 10,000/s "
                f"| {verdict(None if pg_eps is None else pg_eps >= 10_000)} |"
            )
            lines.append(
                f"| store: restore {summary.get('restore_events') or 0:,} events (Postgres) "
                f"| {fmt_time(pg_restore) if pg_restore else '-'} "
                f"| SQLite {fmt_time(restore) if restore else '-'} | - | <= 0.3 s "
                f"| {verdict(None if pg_restore is None else pg_restore <= 0.3)} |"
            )
    else:
        lines.append(f"| store | failed: {store.get('error')} | | | | |")
    lines += ray_rows(s.get("ray") or {"error": "not run"})

    lines += ["", "### Per-run overhead: one tool call, then an answer (scripted model)", ""]
    lines += [f"| framework | sequential | {width} at once, per run | sequential, ÷ actors |"]
    lines += ["| --- | ---: | ---: | ---: |"]
    lines.append(
        f"| **actors** {results['versions'].get('actors', '')} (fresh agent per run) "
        f"| {time_or_error(ov, 'run_fresh_s')} | {time_or_error(ov, 'run_concurrent_s')} "
        f"| 1.00x |"
    )
    lines.append(
        f"| actors, one agent reused ({get(ov, 'sizes') and ov['sizes'].get('reused_runs')} runs;"
        f" transcript grows) | {time_or_error(ov, 'run_reused_s')} | - "
        f"| {ratio(get(ov, 'run_reused_s'), run)} |"
    )
    if not peer_rows:
        lines.append("| peers | not run (--no-peers) | | |")
    for framework, peer in peer_rows.items():
        if "error" in peer:
            lines.append(f"| {framework} | failed: {peer['error']} | | |")
            continue
        lines.append(
            f"| {framework} {peer.get('version', '')} | {fmt_time(peer['run_s'])} "
            f"| {fmt_time(peer['run_concurrent_s'])} | {ratio(peer['run_s'], run)} |"
        )

    if marks:
        lines += ["", "### One agent reused: per-run cost as its transcript grows", ""]
        lines += ["| driven by | " + " | ".join(f"run {m}" for m in marks) + " | last ÷ first |"]
        lines += ["| --- |" + " ---: |" * (len(marks) + 1)]
        for label, key, ratio_key in (
            ("`Runtime` (actor, threads, event loop)", "runtime_s", "runtime_ratio"),
            ("`SyncDriver` (the agent loop inline)", "inline_s", "inline_ratio"),
        ):
            cells = " | ".join(fmt_time(growth[key][m]) for m in marks)
            lines.append(f"| {label} | {cells} | {growth[ratio_key]:.2f}x |")

    lines += ["", "### Floor and lifecycle (actors)", ""]
    lines += ["| measure | median |", "| --- | ---: |"]
    for label, key in [
        ("raw pykka ask round trip", "raw_ask_s"),
        ("hop: status query through an agent actor", "hop_s"),
        ("`ref.context()` (query + serialized copy of the context)", "context_query_s"),
        (
            "the agent loop alone, driven inline (no actor, thread or event loop)",
            "run_state_machine_s",
        ),
        ("spawn one agent (root, `Runtime.spawn`)", "spawn_s"),
        ("stop one agent (`ref.stop()`)", "stop_s"),
        ("spawn, 100 back to back before running them at once (per agent)", "spawn_concurrent_s"),
        ("reused agent: runs 1-100", "run_reused_first_half_s"),
        ("reused agent: runs 101-200", "run_reused_second_half_s"),
    ]:
        lines.append(f"| {label} | {time_or_error(ov, key)} |")
    lines.append(
        f"| fan-out: spawn per child (on the parent's thread) "
        f"| {time_or_error(fan, 'spawn_per_child_s')} |"
    )
    lines.append(f"| fan-out: last child spawned after | {time_or_error(fan, 'spawn_phase_s')} |")
    lines.append(f"| fan-out: threads at peak | {get(fan, 'threads_peak') or '-'} |")

    lines += ["", "### Scale: live idle agents (no thread of their own)", ""]
    lines += [
        "| agents | spawn / agent | bare thread start, same moment | RSS | RSS / agent "
        "| threads added | stop all |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        if not row.get("spawned"):
            lines.append(f"| {row['agents']:,} | failed: {row.get('error')} | | | | |")
            continue
        note = f" (only {row['spawned']:,}: {row['error']})" if row.get("error") else ""
        lines.append(
            f"| {row['agents']:,}{note} | {fmt_time(row['spawn_per_agent_s'])} "
            f"| {fmt_time(row.get('bare_thread_start_s', float('nan')))} "
            f"| {row['rss_bytes'] / 1024**2:,.0f} MiB "
            f"| {row['rss_per_agent_bytes'] / 1024:,.1f} KiB "
            f"| {row.get('threads', '-')} | {fmt_time(row['shutdown_s'])} |"
        )
    if "error" in scale:
        lines.append(f"| failed: {scale['error']} | | | | | | |")
    limits = get(scale, "limits")
    if limits:
        lines += [
            "",
            f"Thread ceilings here: kernel `threads-max` {limits['threads_max']}, `pid_max` "
            f"{limits['pid_max']} (every thread takes a pid), `RLIMIT_NPROC` "
            f"{limits['user_procs']}.",
        ]
    if get(imp, "heaviest"):
        parts = ", ".join(
            f"{row['module']} {fmt_time(row['cumulative_s'])}" for row in imp["heaviest"][:6]
        )
        lines += ["", f"`import actors` spends most on: {parts} (`-X importtime`, cumulative)."]
    return "\n".join(lines)


def ray_rows(ray: dict[str, Any]) -> list[str]:
    """The summary's rows for RayRuntime (bench/cluster.py)."""
    if "error" in ray:
        return [f"| RayRuntime | failed: {ray['error']} | | | | |"]
    raw, hop = ray["raw_call_s"], ray["hop_s"]
    fan, hosted = ray["fanout"], ray["per_host"]
    return [
        f"| Ray: hop to an agent on a host (`ref.status`) | {fmt_time(hop)} "
        f"| raw Ray actor call {fmt_time(raw)} | {ratio(hop, raw)} | <= 1.3x raw call "
        f"| {verdict(hop / raw <= 1.3)} |",
        f"| Ray: fan-out, {fan['children']:,} spread children over {fan['hosts'] - 1} hosts, "
        f"{fmt_time(fan['latency_s'])} model wait | {fmt_time(fan['wall_s'])} wall "
        f"| ideal {fmt_time(fan['latency_s'])} | overlap {fan['overlap']:.0f}x | - | - |",
        f"| Ray: idle agents on one host | {hosted['rss_per_agent_bytes'] / 1024:.1f} KiB each "
        f"({hosted['live']:,} agents) | - | - | - | - |",
        *peer_rows(ray.get("peers")),
    ]


def peer_rows(peers: dict[str, Any] | None) -> list[str]:
    """The rows of peer messages between two hosts (bench/cluster.py, issue 29)."""
    if peers is None:
        return []
    raw, lone = peers["raw_call_s"], peers["latency_median_s"]
    rate = peers["rate_per_s"]
    return [
        f"| Ray: peer message host 0 -> host 1, one at a time (send to arrival, median) "
        f"| {fmt_time(lone)} | raw Ray actor call {fmt_time(raw)} | {ratio(lone, raw)} "
        f"| - | - |",
        f"| Ray: peer messages host 0 -> host 1, {peers['messages']:,} from 4 senders "
        f"| {rate:,.0f}/s | - | - | >= 5,000/s | {verdict(rate >= 5_000)} |",
    ]


def header(results: dict[str, Any]) -> str:
    m = results["machine"]
    load = results.get("load") or {}
    return (
        f"Machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}, {m['platform']}. "
        f"Load average {load.get('before', '-')} before, {load.get('after', '-')} after. "
        f"Command: `{results['command']}`. Started {results['started']}."
    )


def loadavg() -> str | None:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--quick", action="store_true", help="tiny sizes: check that it all runs")
    p.add_argument("--no-peers", action="store_true", help="measure actors only")
    p.add_argument("--json", type=Path, default=BENCH / "results.json", help="where the figures go")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    args = p.parse_args(argv)

    from importlib import metadata

    command = "python -m bench" + (" --quick" if args.quick else "")
    command += " --no-peers" if args.no_peers else ""
    results: dict[str, Any] = {
        "command": command,
        "quick": args.quick,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": {"actors": metadata.version("actors"), "pykka": metadata.version("pykka")},
        "load": {"before": loadavg()},
        "sections": {},
    }
    sections = results["sections"]
    sections["imports"] = actors_section("imports", args.quick, timeout=300)
    sections["overhead"], peer_figures = per_run(args.quick, not args.no_peers)
    sections["fanout"] = actors_section("fanout", args.quick, timeout=600)
    sections["growth"] = actors_section("growth", args.quick, timeout=600)
    sections["scale"] = actors_section("scale", args.quick, timeout=1800)
    sections["virtual"] = actors_section("virtual", args.quick, timeout=3600)
    sections["retention"] = actors_section("retention", args.quick, timeout=3600)
    sections["serve"] = actors_section("serve", args.quick, timeout=3600)
    sections["compaction"] = actors_section("compaction", args.quick, timeout=600)
    sections["parts"] = actors_section("parts", args.quick, timeout=600)
    sections["store"] = store_section(args.quick)
    sections["sim"] = actors_section("sim", args.quick, timeout=1800)
    sections["sim_http"] = actors_section("sim_http", args.quick, timeout=1800)
    sections["http"] = actors_section("real_models", args.quick, timeout=1200)
    sections["ray"] = actors_section("cluster", args.quick, timeout=600)
    if peer_figures is not None:
        sections["peers"] = peer_figures
    results["load"]["after"] = loadavg()

    report = "\n\n".join(
        [
            header(results),
            render(results),
            render_sim(sections["sim"]),
            render_sim_http(sections["sim_http"]),
            render_http(sections["http"]),
        ]
    )
    print(report)
    args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    if args.markdown:
        args.markdown.write_text(report + "\n")
    log(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
