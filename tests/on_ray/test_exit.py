"""A program that makes a RayRuntime (and its own Ray) exits promptly, leaving no process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from on_ray.conftest import LOOPBACK_ENV, worker_env

PROGRAM = """
import ray
from actors import Agent
from actors.ray import RayRuntime
from actors.testing import ScriptedModel

runtime = RayRuntime(hosts=2)  # no ray.init before: it starts a cluster of its own
print(runtime.spawn(Agent("a", model=ScriptedModel(["hi"]))).run("x").output, flush=True)
print(ray.get(runtime.host_handles()[0].ready.remote()), flush=True)
# no shutdown: leaving must stop the hosts and the cluster
"""


def test_a_program_that_never_shuts_down_its_runtime_exits_promptly(ray_cluster: Any) -> None:
    env = {**os.environ, **LOOPBACK_ENV, **worker_env()["env_vars"]}
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=90, env=env
    )
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    output, host_pid = done.stdout.split()[:2]
    assert output == "hi"
    assert took < 45  # ray.init and two hosts take ~5 s here; exiting takes ~1 s
    try:
        os.kill(int(host_pid), 0)
    except ProcessLookupError:
        pass  # the host's process is gone with the program's Ray
    else:
        raise AssertionError(f"host process {host_pid} outlived the program")
