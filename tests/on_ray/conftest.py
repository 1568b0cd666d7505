"""A local Ray cluster for the whole session (started once: ``ray.init`` takes seconds).

Every Ray the tests start (in this process, in the programs they run, ``ray start --head``)
uses a directory, ports and a token of the tests' own (`on_ray.cluster`): a user's cluster
running on the same machine is neither joined nor disturbed, and nothing is left behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from on_ray.cluster import (
    LOOPBACK_ENV,
    USER_RAY_VARIABLES,
    isolated_env,
    new_token,
    short_temp_dir,
)

HERE = Path(__file__).resolve().parent

os.environ.update(LOOPBACK_ENV)


def no_ray(reason: str) -> NoReturn:
    """Skip, or fail under CI (CI=true), where Ray must be installed."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI installs it with the dev extra", pytrace=False)
    pytest.skip(f"{reason}: pip install -e '.[dev]' (or 'actors[ray]')")


def worker_env() -> dict[str, Any]:
    """What hosts need to import the test specs (by module name, as users' specs are)."""
    return {"env_vars": {"PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE.parents[1])])}}


@pytest.fixture(scope="session")
def ray_root() -> Iterator[Path]:
    """This process's environment points every Ray of the tests at a directory of its own.

    ``RAY_TMPDIR`` (set here, inherited by the programs the tests start) is where a Ray that
    is given no directory puts its files, ``/tmp/ray`` otherwise: a user's cluster keeps its
    ``ray_current_cluster`` and ``session_latest`` there. The directory is removed at the end.
    """
    root = short_temp_dir("actors-ray-")
    saved = {name: os.environ.get(name) for name in [*USER_RAY_VARIABLES, "RAY_AUTH_MODE"]}
    saved["RAY_AUTH_TOKEN"] = os.environ.get("RAY_AUTH_TOKEN")
    for name in USER_RAY_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(isolated_env(root, new_token()))
    try:
        yield root
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster(ray_root: Path) -> Iterator[Any]:
    """``ray.init`` on loopback with two CPUs, shut down at the end of the session."""
    try:
        import ray
    except ImportError:
        no_ray("Ray is not installed")
    ray.init(
        address="local",  # a cluster of its own, never one found running on the machine
        num_cpus=2,
        include_dashboard=False,
        runtime_env=worker_env(),
        logging_level="WARNING",
        configure_logging=False,
        _temp_dir=str(ray_root / "ray"),  # as RAY_TMPDIR says, and said where it is read
    )
    yield ray
    ray.shutdown()


@pytest.fixture
def latch(ray_cluster: Any) -> Iterator[Any]:
    """Set when a tool of `on_ray.agents` starts: its call is durable then (write-ahead)."""
    from on_ray import agents

    actor = (
        ray_cluster.remote(agents.Latch)
        .options(name=agents.LATCH, namespace=agents.LATCH_NAMESPACE, num_cpus=0)
        .remote()
    )
    yield actor
    ray_cluster.kill(actor)
