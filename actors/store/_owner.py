"""Who holds a session: the process and store instance behind `SessionStore.acquire`.

A holder is a store instance (a random token) in a process (host name, pid and a start token
that tells this process from a later one given the same pid). A store that finds a session
held by someone else asks `holder_alive`: a holder in a process that ended does not count.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

from actors.exceptions import SessionBusyError

__all__ = ["Holder", "busy", "close_holder", "holder_alive", "new_holder", "process_start"]

_open_tokens: set[str] = set()
_open_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Holder:
    """A store instance that may hold sessions.

    Attributes:
        host: The host name of its process.
        pid: Its process id.
        started: A token of the process's start (boot id and start time), "" where the
            operating system gives none.
        token: The store instance, unique among every store ever opened.
    """

    host: str
    pid: int
    started: str
    token: str


def process_start(pid: int) -> str | None:
    """A token of when process ``pid`` started; None when no such process runs.

    On Linux it is the boot id and the start time in clock ticks, so a new process that reuses
    a dead one's pid has another token. Elsewhere it is "" for any running process (a reused
    pid then looks alive, which only keeps a session busy too long, never too short).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return _exists(pid)
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # a zombie has ended; only its exit status is left
        return None
    return f"{_boot_id()}:{fields[19]}"


def _exists(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # it runs, as another user
        return ""
    return ""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


_this: tuple[int, str] = (0, "")


def _this_start() -> str:
    global _this
    pid = os.getpid()
    if _this[0] != pid:  # first call, or a forked child
        started = process_start(pid) if sys.platform.startswith("linux") else ""
        _this = (pid, started or "")
    return _this[1]


def new_holder(store: object) -> Holder:
    """A holder for ``store``, live in this process until `close_holder` or garbage collection."""
    holder = Holder(socket.gethostname(), os.getpid(), _this_start(), secrets.token_hex(16))
    with _open_lock:
        _open_tokens.add(holder.token)
    weakref.finalize(store, close_holder, holder)
    return holder


def close_holder(holder: Holder) -> None:
    """Mark ``holder``'s store closed: what it still holds is free from now on."""
    with _open_lock:
        _open_tokens.discard(holder.token)


def holder_alive(holder: Holder) -> bool:
    """Whether ``holder`` may still be writing, as far as this process can tell.

    A holder on another host counts as alive: nothing here can tell whether it still runs.
    """
    if holder.host != socket.gethostname():
        return True
    if holder.pid == os.getpid() and holder.started == _this_start():
        with _open_lock:
            return holder.token in _open_tokens
    started = process_start(holder.pid)
    if started is None:
        return False
    return started == holder.started or not started or not holder.started


def busy(session_id: str, host: str | None, pid: int | None, where: str) -> SessionBusyError:
    """The error for a write or an acquire refused because another store holds the session."""
    if pid is None:
        who = "another store"
    elif host is None:
        who = f"another store (process {pid})"
    else:
        who = f"another store (process {pid} on host {host!r})"
    return SessionBusyError(
        f"session {session_id!r} in {where} is held by {who}, its only writer until it "
        "releases the session, closes its store or ends; nothing was written. Wait for it, "
        "or use another session",
        session_id,
        host,
        pid,
    )
