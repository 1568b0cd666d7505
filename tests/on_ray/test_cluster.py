"""A program on a cluster started by ``ray start --head`` (loopback): it runs and exits."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from on_ray.conftest import HERE, LOOPBACK_ENV, no_ray

DRIVER = HERE / "cluster_driver.py"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(HERE.parent), str(HERE.parents[1])])
    # A driver given an address uses token authentication only when told to (Ray 2.5x+).
    return {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": path, "RAY_AUTH_MODE": "token"}


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head node on 127.0.0.1 in a process group of its own, killed at the end."""
    ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent))
    if ray_bin is None:
        no_ray("the ray command is not installed")
    port = _free_port()
    head = subprocess.Popen(
        [
            ray_bin,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--dashboard-agent-listen-port=0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    try:
        assert head.stdout is not None
        seen = []
        for line in head.stdout:  # blocks until the head says it is up (or exits)
            seen.append(line)
            if "Ray runtime started" in line:
                break
        else:
            pytest.fail("ray start --head exited:\n" + "".join(seen))
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head, its raylet, GCS and workers
        head.wait(30)
        if head.stdout is not None:
            head.stdout.close()


def _drive(address: str, *args: str) -> tuple[dict[str, object], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(DRIVER), address, *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report, took


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_program_on_a_ray_cluster_runs_its_tree_and_exits_promptly(
    ray_head: str, tmp_path: Path
) -> None:
    report, took = _drive(ray_head, "sqlite", str(tmp_path / "sessions.db"))
    assert report["output"] == "done"
    assert took < 60
    # Its hosts were processes of the cluster, not of the program: they go with the program
    # (the raylet reaps them; there is no event to wait on from here, so the check polls).
    pids = report["host_pids"]
    assert isinstance(pids, list)
    deadline = time.monotonic() + 30
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in pids)


def test_hosts_of_a_cluster_share_a_postgres_store_and_survive_a_host_dying(
    ray_head: str, postgres_dsn: str
) -> None:
    # postgres_dsn (tests/conftest.py): a fresh database; skips without a server, fails under CI.
    report, _took = _drive(ray_head, "postgres", postgres_dsn)
    assert report["output"] == "done"
    assert report["fault_output"] == "carried on"
    assert "HostLostError" in str(report["fault_answer"])
    assert report["child_status"] == "failed"
