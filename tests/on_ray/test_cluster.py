"""A program on a cluster started by ``ray start --head`` (loopback): it runs and exits.

Another user's cluster is up meanwhile (users of Ray have one): the tests' clusters neither join
it nor disturb it, and leave nothing behind (`on_ray.cluster`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from on_ray.cluster import (
    HeadNode,
    default_ray_root,
    listening,
    own_head,
    processes_using,
    ray_command,
    users_head,
)
from on_ray.conftest import HERE, no_ray

DRIVER = HERE / "cluster_driver.py"


def _env() -> dict[str, str]:
    # os.environ holds the tests' own Ray directory and token (the ray_root fixture).
    path = os.pathsep.join([str(HERE.parent), str(HERE.parents[1])])
    return {**os.environ, "PYTHONPATH": path}


def _ray_bin() -> str:
    ray_bin = ray_command()
    if ray_bin is None:
        no_ray("the ray command is not installed")
    return ray_bin


@pytest.fixture(scope="module")
def users_cluster(ray_root: Path) -> Iterator[HeadNode]:
    """Another user's cluster, up while this module's tests run."""
    with users_head(_ray_bin(), _env()) as head:
        yield head


@pytest.fixture(scope="module")
def ray_head(users_cluster: HeadNode) -> Iterator[str]:
    """A head node of the tests' own on 127.0.0.1, stopped (and its directory removed) after."""
    with own_head(_ray_bin(), _env()) as head:
        yield head.address


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


def test_a_program_on_a_test_cluster_runs_and_exits_and_another_users_cluster_is_left_alone(
    users_cluster: HeadNode, tmp_path: Path
) -> None:
    user_file = (users_cluster.temp_dir or default_ray_root()) / "ray_current_cluster"
    user_address = user_file.read_text()
    latest = default_ray_root() / "session_latest"
    latest_before = os.readlink(latest) if latest.is_symlink() else None
    with own_head(_ray_bin(), _env()) as ours:
        report, took = _drive(ours.address, "sqlite", str(tmp_path / "sessions.db"))
        assert report["output"] == "done"
        assert took < 60
        # Its hosts were processes of the cluster, not of the program: they go with the
        # program (the raylet reaps them; there is no event to wait on here, so this polls).
        pids = report["host_pids"]
        assert isinstance(pids, list)
        deadline = time.monotonic() + 30
        while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(_gone(pid) for pid in pids)
        # A program that starts a Ray of its own ("local", as RayRuntime() does) does not
        # join the other user's cluster either.
        local = subprocess.run(
            [sys.executable, "-c", LOCAL_PROGRAM],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=90,
        )
        assert local.returncode == 0, local.stderr[-3000:]
        assert local.stdout.split()[-1] not in (users_cluster.address, ours.address)
    # Ours is gone, all of it; the other user's cluster still runs, still the one its
    # ray_current_cluster names (a later ray.init() there joins it, not a dead one of ours).
    assert ours.temp_dir is not None
    assert not ours.temp_dir.exists()
    assert not listening(ours.address)
    assert processes_using(ours.temp_dir) == []
    assert users_cluster.alive()
    assert user_file.read_text() == user_address
    assert (os.readlink(latest) if latest.is_symlink() else None) == latest_before


LOCAL_PROGRAM = """
import ray
ray.init("local", num_cpus=1, include_dashboard=False, configure_logging=False)
print(ray.get_runtime_context().gcs_address)
ray.shutdown()
"""


def test_hosts_of_a_cluster_share_a_postgres_store_and_survive_a_host_dying(
    ray_head: str, postgres_dsn: str
) -> None:
    # postgres_dsn (tests/conftest.py): a fresh database; skips without a server, fails under CI.
    report, _took = _drive(ray_head, "postgres", postgres_dsn)
    assert report["output"] == "done"
    assert report["fault_output"] == "carried on"
    assert "HostLostError" in str(report["fault_answer"])
    assert report["child_status"] == "failed"
