"""Real MCP servers for the tests: the toy server over stdio, and over HTTP on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from actors.mcp import MCPServerHTTP, MCPServerStdio

HERE = Path(__file__).resolve().parent
TOY = str(HERE / "toy_server.py")


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[IO[str]]:
    """Where the servers' stderr goes (shown when a test fails)."""
    with open(tmp_path / "server.log", "w+") as log:
        yield log
        log.seek(0)
        sys.stderr.write(log.read()[-4000:])


@pytest.fixture
def toy_stdio(server_log: IO[str]) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, [TOY], name="toy", stderr=server_log)


@dataclass
class HTTPServer:
    """The toy server as a subprocess serving streamable HTTP on a socket the test owns.

    The test keeps the listening socket: a server that crashes is started again on the same
    port (`restart`), with no race for it.
    """

    log: IO[str]
    sock: socket.socket = field(init=False)
    process: subprocess.Popen[Any] | None = None

    def __post_init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.set_inheritable(True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"

    def start(self) -> None:
        fd = self.sock.fileno()
        self.process = subprocess.Popen(
            [sys.executable, TOY, "http", str(fd)],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
        )

    def restart(self) -> None:
        assert self.process is not None
        self.process.wait(timeout=10)  # it crashed (or was told to)
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.sock.close()


@pytest.fixture
def http_server(server_log: IO[str]) -> Iterator[HTTPServer]:
    server = HTTPServer(server_log)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def toy_http(http_server: HTTPServer) -> MCPServerHTTP:
    return MCPServerHTTP(http_server.url, name="toy")


@pytest.fixture(params=["stdio", "http"])
def toy(request: pytest.FixtureRequest) -> MCPServerStdio | MCPServerHTTP:
    """The toy server over each transport."""
    name = "toy_stdio" if request.param == "stdio" else "toy_http"
    server: MCPServerStdio | MCPServerHTTP = request.getfixturevalue(name)
    return server


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
