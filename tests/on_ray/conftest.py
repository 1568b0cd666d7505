"""A local Ray cluster for the whole session (started once: ``ray.init`` takes seconds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

HERE = Path(__file__).resolve().parent

# Ray gives its processes the machine's network address even when told 127.0.0.1; this switch
# (meant for laptops) keeps every Ray process of the tests on loopback.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
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
def ray_cluster() -> Iterator[Any]:
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
