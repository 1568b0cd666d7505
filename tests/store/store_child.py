"""A process that uses a session store as a test tells it, reporting each step on stdout.

Usage: python store_child.py SPEC COMMAND ARGS...

SPEC is ``sqlite:PATH`` or ``postgres:SCHEMA`` (the connection string comes from the
environment, $ACTORS_CHILD_POSTGRES_DSN, never from the command line). Commands:

- ``crash FIRST_BATCH``: append batches forever, printing each batch once it is committed.
- ``hold SESSION``: print ``ready``; on ``go`` (stdin), acquire SESSION. The winner prints
  ``won``, writes 10 events, prints ``wrote`` and holds on until stdin closes. A loser prints
  ``busy HOST PID``; on ``append`` it tries to append, prints ``refused`` when refused (else
  ``appended``), and exits.
- ``write SESSION BATCHES``: print ``ready``; on ``go``, acquire SESSION, append BATCHES batches,
  print ``done`` and exit.
"""

from __future__ import annotations

import os
import sys

from crash_child import BATCH, event

from actors.exceptions import SessionBusyError
from actors.store import AgentRecord, PostgresStore, SessionStore, SQLiteStore


def open_store(spec: str) -> SessionStore:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SQLiteStore(where, durability="sync")
    return PostgresStore(os.environ["ACTORS_CHILD_POSTGRES_DSN"], schema=where)


def prepare(store: SessionStore, session_id: str) -> None:
    store.create_session(session_id, root_agent_id="root")
    store.put_agent(session_id, AgentRecord("root", None, "spec", "running"))


def append(store: SessionStore, session_id: str, batch: int) -> None:
    seqs = range(batch * BATCH, (batch + 1) * BATCH)
    store.append_events(session_id, "root", [event(seq) for seq in seqs])


def crash(store: SessionStore, first: int) -> None:
    prepare(store, "crash")
    print("ready", flush=True)
    for batch in range(first, first + 100_000):  # bounded, should the parent vanish
        append(store, "crash", batch)
        print(batch, flush=True)  # only after append_events returned: committed


def hold(store: SessionStore, session_id: str) -> None:
    print("ready", flush=True)
    if sys.stdin.readline() != "go\n":
        return
    try:
        store.acquire(session_id)
    except SessionBusyError as error:
        print(f"busy {error.holder_host} {error.holder_pid}", flush=True)
        if sys.stdin.readline() != "append\n":
            return
        try:
            append(store, session_id, 1)
        except SessionBusyError:
            print("refused", flush=True)
        else:
            print("appended", flush=True)
        return
    print("won", flush=True)
    prepare(store, session_id)
    append(store, session_id, 0)
    print("wrote", flush=True)
    sys.stdin.read()  # hold the session until the parent lets go (or kills this process)


def write(store: SessionStore, session_id: str, batches: int) -> None:
    print("ready", flush=True)
    if sys.stdin.readline() != "go\n":
        return
    store.acquire(session_id)
    prepare(store, session_id)
    for batch in range(batches):
        append(store, session_id, batch)
    print("done", flush=True)


def main() -> None:
    spec, command, *args = sys.argv[1:]
    with open_store(spec) as store:
        if command == "crash":
            crash(store, int(args[0]))
        elif command == "hold":
            hold(store, args[0])
        elif command == "write":
            write(store, args[0], int(args[1]))
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
