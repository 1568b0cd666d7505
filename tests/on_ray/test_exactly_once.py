"""Hosts SIGKILLed, again and again, during fan-outs with peer traffic: nothing lost, nothing twice.

A lead fans tasks out to children spread over the other hosts; each child tells a listener
(on the lead's host) two things, then pauses at a rendezvous, where the test kills the hosts of
some of them (SIGKILL of the host's process; Ray restarts it), then lets the others go on.
After every round: each child's result reached the lead once (a result, or `HostLostError`);
no child's model was asked the same step twice (no run started twice); every peer message a
sender logged reached the listener once (a killed sender's are sent again by the lead's host
as it closes the lost subtree); every agent's log is whole in the store.
"""

from __future__ import annotations

import os
import signal
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import AgentContext, ToolResultMessage
from actors.store import SQLiteStore
from on_ray import agents

BOUND = 60.0
HOSTS = 3
CHILDREN = 4


@pytest.fixture
def tally(ray_cluster: Any) -> Iterator[Any]:
    actor = (
        ray_cluster.remote(agents.Tally)
        .options(name="tally", namespace=agents.FANOUT_NAMESPACE, num_cpus=0)
        .remote()
    )
    yield actor
    ray_cluster.kill(actor)


def sigkill(ray: Any, handle: Any) -> int:
    """SIGKILL the process of a host (as the machine losing it would); its pid."""
    pid: int = ray.get(handle.ready.remote(), timeout=BOUND)
    os.kill(pid, signal.SIGKILL)
    return pid


def up(ray: Any, handle: Any) -> None:
    """Return once a host answers (Ray restarts a killed one; nothing to wait on but it)."""
    from ray.exceptions import RayActorError

    deadline = time.monotonic() + BOUND
    while True:
        try:
            ray.get(handle.ready.remote(), timeout=BOUND)
            return
        except RayActorError:  # still restarting: Ray answers at once that it is unavailable
            assert time.monotonic() < deadline, "a host did not come back"
            time.sleep(0.1)


def on_host(index: int, hosts: int, prefix: str) -> str:
    """A session id that `RayRuntime.open_session` places on host ``index``."""
    return next(
        f"{prefix}-{n}"
        for n in range(1000)
        if zlib.crc32(f"{prefix}-{n}".encode()) % hosts == index
    )


def fan_out(ray: Any, runtime: Any, lead: Any, listener: str, name: str, kill: list[int]) -> Any:
    """One round: the fan-out runs, its children pause, hosts ``kill`` die, the rest go on."""
    meeting = (
        ray.remote(agents.Rendezvous)
        .options(name=name, namespace=agents.FANOUT_NAMESPACE, num_cpus=0)
        .remote()
    )
    try:
        future = lead.run_async(f"{name}|{listener}|{name}|{CHILDREN}")
        ray.get(meeting.wait_for.remote(CHILDREN), timeout=BOUND)
        killed = [sigkill(ray, runtime.host_handles()[index]) for index in kill]
        ray.get(meeting.open.remote(), timeout=BOUND)
        result = future.result(BOUND)
    finally:
        ray.kill(meeting)
    assert len(killed) == len(kill)
    return result


@pytest.mark.timeout(120)  # five hosts killed and restarted: ~30 s on an idle 2-core machine
def test_hosts_killed_during_fan_outs_lose_nothing_and_start_nothing_twice(
    ray_cluster: Any, tally: Any, tmp_path: Path
) -> None:
    from actors.ray import RayRuntime

    with SQLiteStore(tmp_path / "sessions.db") as store, RayRuntime(hosts=HOSTS, store=store) as rt:
        lead = rt.spawn(agents.FAN_LEAD, session_id="lead")
        home = rt.host_of(lead.agent_id)
        listener = rt.open_session(agents.LISTENER, session_id=on_host(home, HOSTS, "listener"))
        assert rt.host_of(listener.agent_id) == home  # the hosts killed are the others
        others = [i for i in range(HOSTS) if i != home]
        # One host is killed in every round (the second time as soon as it is back), the
        # other with it once.
        rounds = {"r1": [others[0]], "r2": others, "r3": [others[0]]}
        results = {
            name: fan_out(ray_cluster, rt, lead, listener.agent_id, name, kill)
            for name, kill in rounds.items()
        }

        # Each child's result reached the lead once: a result, or the loss of its host.
        for name, result in results.items():
            assert result.output == "done", name
            answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
            answers = answers[-CHILDREN:]
            assert len({m.tool_call_id for m in answers}) == CHILDREN
            lost = [m for m in answers if m.is_error]
            assert all("HostLostError" in m.content for m in lost), name
            finished = sorted(m.content for m in answers if not m.is_error)
            # The children of a killed host are lost, the others finish.
            assert len(lost) == CHILDREN * len(rounds[name]) // (HOSTS - 1), (name, lost)
            assert all(text.startswith("finished ") for text in finished)

        # No run started twice: no child's model was asked the same step twice.
        asked = ray_cluster.get(tally.seen.remote(), timeout=BOUND)
        assert asked, "the children's model calls were not counted"
        assert {key: n for key, n in asked.items() if n > 1} == {}

        # Every message a sender logged reached the listener once, killed senders' too.
        for handle in rt.host_handles():
            up(ray_cluster, handle)
        ray_cluster.get([h.peers_drained.remote() for h in rt.host_handles()], timeout=BOUND)
        heard = [
            (e.data["from"], e.data["n"], e.data["content"])
            for e in listener.context().events
            if e.type == "message_received"
        ]
        assert [k for k, n in Counter(heard).items() if n > 1] == []
        stored = store.load("lead")
        sent = set()
        for entry in stored.agents:
            ctx = AgentContext.deserialize(entry.context)
            sent |= {
                (entry.record.agent_id, e.data["n"], e.data["content"])
                for e in ctx.events
                if e.type == "message_sent"
            }
            # One start per run, and each child ran once.
            starts = [e.data["run_id"] for e in ctx.events if e.type == "turn_start"]
            assert len(starts) == len(set(starts)), entry.record.agent_id
            if entry.record.parent_id is not None:
                assert len(starts) == 1, entry.record.agent_id
                assert entry.record.status in ("finished", "failed"), entry.record
        assert set(heard) == sent
        assert len(sent) == 2 * CHILDREN * len(rounds)
        # The lead's stored log is its live one: nothing it reported is missing.
        (root,) = [a for a in stored.agents if a.record.agent_id == lead.agent_id]
        assert AgentContext.deserialize(root.context).messages == lead.context().messages
