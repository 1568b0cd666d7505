"""A process that appends batches to a SQLiteStore forever, reporting each commit on stdout.

Run by test_sqlite_store.py, which kills it with SIGKILL after a seeded number of reports.
Usage: python crash_child.py PATH DURABILITY FIRST_BATCH
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from actors import Event
from actors.store import AgentRecord, SQLiteStore

BATCH = 10
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def event(seq: int) -> Event:
    """The event every run writes at ``seq``: re-appending it is idempotent."""
    return Event(
        seq=seq,
        type="app.step",
        data={"seq": seq, "payload": "x" * (seq % 50)},
        created_at=EPOCH + timedelta(milliseconds=seq),
    )


def main() -> None:
    path, durability, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = SQLiteStore(path, durability=durability)  # type: ignore[arg-type]
    store.create_session("crash", root_agent_id="root")
    store.put_agent("crash", AgentRecord("root", None, "spec", "running"))
    print("ready", flush=True)
    for batch in range(first, first + 100_000):  # bounded, should the parent vanish
        seqs = range(batch * BATCH, (batch + 1) * BATCH)
        store.append_events("crash", "root", [event(seq) for seq in seqs])
        print(batch, flush=True)  # only after append_events returned: committed


if __name__ == "__main__":
    main()
