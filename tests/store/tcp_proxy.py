"""A loopback TCP proxy in front of the test database server, which a test breaks on purpose."""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Trap:
    marker: bytes
    deliver: bool
    fired: threading.Event = field(default_factory=threading.Event)


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.swallow: _Trap | None = None

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class Proxy:
    """Forwards connections from ``127.0.0.1:port`` to ``target``, until told to break them.

    `cut_when` arms a one-shot trap on the next chunk a client sends that holds a marker: the
    connection is dropped, either before the chunk reaches the server (``deliver=False``) or
    after the server received it and answered, with the answer thrown away (``deliver=True``).
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[_Pair] = []
        self._threads: list[threading.Thread] = []
        self._trap: _Trap | None = None
        self._lock = threading.Lock()
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener was closed
                return
            server = socket.create_connection(self._target)
            pair = _Pair(client, server)
            with self._lock:
                self._pairs.append(pair)
            self._spawn(self._upstream, pair)
            self._spawn(self._downstream, pair)

    def _upstream(self, pair: _Pair) -> None:
        while chunk := self._recv(pair.client):
            with self._lock:
                trap = self._trap if self._trap and self._trap.marker in chunk else None
                if trap is not None:
                    self._trap = None
            if trap is not None and not trap.deliver:
                trap.fired.set()  # before the client can see the connection drop
                pair.close()
                return
            if trap is not None:
                pair.swallow = trap
            if not self._send(pair.server, chunk):
                break
        pair.close()

    def _downstream(self, pair: _Pair) -> None:
        while chunk := self._recv(pair.server):
            if pair.swallow is not None:  # the server answered the trapped chunk: drop it all
                pair.swallow.fired.set()  # before the client can see the connection drop
                pair.close()
                return
            if not self._send(pair.client, chunk):
                break
        pair.close()

    @staticmethod
    def _recv(sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    @staticmethod
    def _send(sock: socket.socket, chunk: bytes) -> bool:
        try:
            sock.sendall(chunk)
        except OSError:
            return False
        return True

    def cut_when(self, marker: bytes, *, deliver: bool) -> threading.Event:
        """Arm the trap; the event is set once it has cut a connection."""
        trap = _Trap(marker, deliver)
        with self._lock:
            self._trap = trap
        return trap.fired

    def stop_listening(self) -> None:
        """Refuse new connections from now on (established ones go on)."""
        # shutdown wakes the thread blocked in accept(); close alone would leave it listening.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self.stop_listening()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()
        for thread in self._threads:
            thread.join(timeout=10)

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
