"""Ray clusters of the tests' own, beside any other cluster on the machine (users of Ray have one).

A cluster of the tests never uses what a user's cluster uses: it gets a temporary directory of
its own (never ``/tmp/ray``, where ``ray_current_cluster`` tells a later ``ray.init()`` which
cluster to join), ports of its own, and a token of its own (never ``~/.ray/auth_token``). It is
stopped as ``ray stop`` would, but only its own processes (its process group, and anything
started with its directory), and its directory is removed after it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

# Ray gives its processes the machine's network address even when told 127.0.0.1; this switch
# (meant for laptops) keeps every Ray process of the tests on loopback.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

# What a user's shell may hold that would steer a test's Ray to the user's cluster.
USER_RAY_VARIABLES = ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR")

STOP_GRACE_S = 2.0


def short_temp_dir(prefix: str) -> Path:
    """A new directory under /tmp: Ray's socket paths under it must fit in 107 bytes."""
    parent = "/tmp" if os.path.isdir("/tmp") else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(address: str) -> bool:
    """Whether something accepts connections at ``host:port``."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def isolated_env(root: Path, token: str) -> dict[str, str]:
    """Variables that give every Ray of the tests ``root`` and ``token`` (and loopback).

    ``RAY_TMPDIR`` is where Ray puts a cluster's files when nobody names a directory
    (``ray.init("local")`` in the tests and in the programs they start); an explicit
    ``RAY_AUTH_TOKEN`` means nothing is read from or written to ``~/.ray/auth_token``.
    """
    return {
        **LOOPBACK_ENV,
        "RAY_TMPDIR": str(root),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
    }


def new_token() -> str:
    """A token for a cluster of the tests."""
    return secrets.token_hex(32)


def processes_using(directory: Path) -> list[int]:
    """Process ids whose command line names ``directory`` (Ray passes its dirs to each)."""
    name = str(directory).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if any(arg.endswith(name) or name + b"/" in arg for arg in args):
            found.append(int(entry.name))
    return found


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a zombie does not: it waits for reaping,
    which an orphan's may never get in a container whose init does not reap)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class HeadNode:
    """A ``ray start --head --block`` in a process group of its own."""

    process: subprocess.Popen[str]
    address: str
    temp_dir: Path | None  # None: Ray's default directory (a user's cluster)
    output: list[str]

    def alive(self) -> bool:
        """Whether the head still runs and its GCS still answers."""
        return self.process.poll() is None and listening(self.address)

    def stop(self) -> None:
        """Stop this cluster's processes only (SIGTERM, as ``ray stop``; then SIGKILL)."""
        pgid = self.process.pid
        if _group_alive(pgid):
            with suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        # Nothing to wait on for a whole process group: poll it, bounded.
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(pgid):
            with suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        # A process that left the group (none does today) is still known by our directory.
        for pid in processes_using(self.temp_dir) if self.temp_dir is not None else ():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            self.process.wait(30)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


def ray_command() -> str | None:
    """The ``ray`` command of this Python's environment, if it is installed."""
    return shutil.which("ray", path=str(Path(sys.executable).parent))


def start_head(
    ray_bin: str,
    env: Mapping[str, str],
    *,
    temp_dir: Path | None,
    port: int,
    num_cpus: int = 2,
    own_ports: bool = True,
) -> HeadNode:
    """Start a head node on 127.0.0.1 and wait until it says it is up.

    Args:
        ray_bin: The ``ray`` command.
        env: Its environment.
        temp_dir: Its root directory (None: Ray's default, as a user's cluster has).
        port: Its GCS port.
        num_cpus: CPUs it offers.
        own_ports: Give every other port it opens a free one (False: Ray's defaults).

    Raises:
        RuntimeError: ``ray start`` exited before the head was up (with its output).
    """
    args = [
        ray_bin,
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        f"--num-cpus={num_cpus}",
        "--include-dashboard=false",
        "--disable-usage-stats",
    ]
    if temp_dir is not None:
        args.append(f"--temp-dir={temp_dir}")
    if own_ports:
        # Each has a fixed default that a user's cluster holds; 0 for worker ports means ports
        # the system picks, outside the default range 10002-19999 a user's workers use.
        args += [
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--node-manager-port={free_port()}",
            f"--object-manager-port={free_port()}",
            "--min-worker-port=0",
            "--max-worker-port=0",
        ]
        if _ray_client_installed():  # else no client server starts (and the flag is refused)
            args.append(f"--ray-client-server-port={free_port()}")
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env),
        start_new_session=True,  # a process group of its own: stopped as one, alone
    )
    head = HeadNode(process, f"127.0.0.1:{port}", temp_dir, [])
    assert process.stdout is not None
    for line in process.stdout:  # blocks until the head says it is up (or exits)
        head.output.append(line)
        if "Ray runtime started" in line:
            return head
    head.stop()
    raise RuntimeError("ray start --head exited:\n" + "".join(head.output))


@contextmanager
def own_head(ray_bin: str, env: Mapping[str, str], num_cpus: int = 2) -> Iterator[HeadNode]:
    """A head node of the tests' own (directory, ports); stopped and removed after."""
    temp_dir = short_temp_dir("actors-ray-head-")
    try:
        head = start_head(ray_bin, env, temp_dir=temp_dir, port=free_port(), num_cpus=num_cpus)
        try:
            yield head
        finally:
            head.stop()
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@contextmanager
def users_head(ray_bin: str, env: Mapping[str, str]) -> Iterator[HeadNode]:
    """A cluster as another user of the machine starts one: ``ray start --head``, defaults.

    Ray's default directory and ports (GCS 6379) when no cluster seems to hold them; else (a
    real user's cluster is up: that one is the proof already) a directory and port of its own.
    A token of its own either way: the tests never authenticate to it. What it adds to Ray's
    default directory (its session, ``ray_current_cluster``, ``session_latest``) is taken away
    after it, and ``session_latest`` is put back; nothing else there is touched (other
    programs may be writing sessions there meanwhile).
    """
    root = default_ray_root()
    default_free = not (root / "ray_current_cluster").exists() and _port_free(6379)
    user_env = {k: v for k, v in env.items() if k not in ("RAY_TMPDIR", *USER_RAY_VARIABLES)}
    user_env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=new_token())
    own_dir = None if default_free else short_temp_dir("actors-ray-user-")
    root_existed = root.exists()
    latest = root / "session_latest"
    latest_before = os.readlink(latest) if latest.is_symlink() else None
    port = 6379 if default_free else free_port()
    head = start_head(ray_bin, user_env, temp_dir=own_dir, port=port, num_cpus=1, own_ports=False)
    session = _session_of(head, root) if own_dir is None else None
    try:
        yield head
    finally:
        head.stop()
        if own_dir is not None:
            shutil.rmtree(own_dir, ignore_errors=True)
        elif session is not None:
            shutil.rmtree(session, ignore_errors=True)
            address_file = root / "ray_current_cluster"
            with suppress(OSError):
                if address_file.read_text().strip() == head.address:
                    address_file.unlink()
            if latest.is_symlink() and Path(os.readlink(latest)) == session:
                latest.unlink()
                if latest_before is not None and Path(latest_before).exists():
                    latest.symlink_to(latest_before)
            if not root_existed:
                with suppress(OSError):  # empty unless someone else wrote there meanwhile
                    root.rmdir()


def _session_of(head: HeadNode, root: Path) -> Path | None:
    """The session directory of ``head`` under ``root`` (its processes name it)."""
    prefix = (str(root) + "/session_").encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != head.process.pid:
                continue
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for arg in args:
            at = arg.find(prefix)
            if at >= 0:
                name = arg[at + len(prefix) :].split(b"/")[0].decode()
                return root / f"session_{name}"
    return None


def _ray_client_installed() -> bool:
    from ray._private.utils import get_ray_client_dependency_error

    return get_ray_client_dependency_error() is None


def default_ray_root() -> Path:
    """Where a Ray told no directory keeps its files (``/tmp/ray`` on Linux and macOS)."""
    return Path("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()) / "ray"


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
