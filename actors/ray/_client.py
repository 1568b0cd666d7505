"""`RayClient`: the driver's side of the agent hosts, as an `AgentRef` addresses it.

An `AgentRef` of a `RayRuntime` is the same class as an in-process one; its host is this
client. What the ref sends to its agent -- runs, resumes, steers, cancels, questions -- goes
through the client's `Lane` to the agent's host, which applies it in the order it was sent,
as the in-process runtime does; a run's end, a question's answer and a streamed run's events
come back through an outbox of the host that the client pulls (`actors.ray._entries`). When a
host answers that it does not hold an agent of the directory (it was restarted), the client
activates the agent there from its store and sends what it refused once more, before anything
sent after it; when a host dies under a run, the run's caller gets `HostLostError`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actors._logging import get_logger
from actors.context._events import Event
from actors.exceptions import AgentStoppedError, HostLostError, UserError
from actors.host import HostReply, OpenStream, Query, TreeNode, TreeStream
from actors.loop._agent import Agent
from actors.loop._types import ResumeRun, StartRun
from actors.ray._entries import AskEntry, DriverEntry, RunEntry, TellEntry
from actors.ray._lane import RESTART_WAIT, Lane
from actors.ray._outbox import OutboxReader
from actors.ray._wire import Missing, Outcome, RootInfo, TreeSeed

__all__ = ["RESTART_WAIT", "RayClient", "Root", "wait_for"]

_log = get_logger("actors.ray")


def wait_for(refs: Any, timeout: float | None = RESTART_WAIT) -> Any:
    """``ray.get`` with the library's errors: a host that is gone, a host that is silent.

    Raises:
        HostLostError: a host died (and did not come back in time) before answering.
        TimeoutError: no answer within ``timeout`` seconds.
    """
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    try:
        return ray.get(refs, timeout=timeout)
    except GetTimeoutError:
        raise TimeoutError(f"an agent host did not answer within {timeout} s") from None
    except RayActorError as exc:
        raise HostLostError(f"an agent host is gone: {exc}") from exc


@dataclass(slots=True)
class Root:
    """The driver's record of a root agent: where it lives and how to bring it back."""

    agent_id: str
    name: str
    host: int
    session_id: str | None
    seed: TreeSeed
    specs: tuple[Agent[Any], ...]


class _HostPassivation:
    """`AgentRef.passivate` on a `RayRuntime`: the agent's host puts its tree to sleep."""

    def __init__(self, client: RayClient) -> None:
        self._client = client

    def passivate(self, agent_id: str, timeout: float) -> bool:
        slept: bool = self._client.call(agent_id, "passivate", timeout, timeout=timeout + 5)
        return slept


class RayClient:
    """Routes an `AgentRef`'s messages to the agent hosts (see the module docstring).

    Args:
        handles: The Ray handles of the hosts, by index.
    """

    def __init__(self, handles: Sequence[Any]) -> None:
        self.handles = list(handles)
        self.lock = threading.RLock()
        self.roots: dict[str, Root] = {}
        self.where: dict[str, int] = {}  # agents other than roots, by id: their host
        self._streams: dict[str, TreeStream] = {}  # opened, waiting for their run
        self._activating: dict[str, threading.Lock] = {}
        self.virtual = _HostPassivation(self)
        self.closed = False
        self.pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="actors-ray")
        # One lane per host: what this driver sends to agents reaches them in order.
        self.lanes = [
            Lane(functools.partial(self._deliver, index), retry=self.retry, pool=self.pool)
            for index in range(len(self.handles))
        ]

    # -- where agents are -----------------------------------------------------------------------

    def host_of(self, agent_id: str) -> int:
        """The index of the host of an agent this driver knows.

        Raises:
            AgentStoppedError: no such agent, or the runtime is shut down (its hosts are gone:
                a call would only wait for a cluster that is not there).
        """
        if self.closed:
            raise AgentStoppedError(
                f"agent {agent_id!r} is not running: its runtime was shut down; spawn it in a "
                "new RayRuntime, or restore its session"
            )
        with self.lock:
            root = self.roots.get(agent_id)
            if root is not None:
                return root.host
            host = self.where.get(agent_id)
        if host is None:
            raise AgentStoppedError(f"agent {agent_id!r} is not running in this runtime")
        return host

    def handle(self, agent_id: str) -> Any:
        """The Ray handle of an agent's host."""
        return self.handles[self.host_of(agent_id)]

    def activate(self, agent_id: str) -> None:
        """Bring a root back on its host from its store (its host was restarted).

        First every host stops what it still runs of the session (children spread there,
        whose results have nowhere to go), then the session is restored on the root's host;
        an interrupted turn is closed as `Runtime.restore` closes it.

        Raises:
            AgentStoppedError: the agent is no root of this runtime, or has no store.
        """
        with self.lock:
            root = self.roots.get(agent_id)
            gate = self._activating.setdefault(agent_id, threading.Lock())
        if root is None or root.seed.store is None or root.session_id is None:
            raise AgentStoppedError(
                f"agent {agent_id!r} is not running: its host was restarted, and it has no "
                "store to come back from"
            )
        with gate:
            handle = self.handles[root.host]
            if wait_for(handle.holds.remote(agent_id)) is not None:
                return  # another caller activated it meanwhile
            wait_for([h.forget.remote(root.session_id, None) for h in self.handles])
            info = wait_for(handle.restore.remote(root.session_id, root.specs, root.seed)).get()
            assert isinstance(info, RootInfo)
            _log.info("agent activated after its host restarted", agent_id=agent_id)

    def call(self, agent_id: str, method: str, *args: Any, timeout: float | None = None) -> Any:
        """Call ``method(agent_id, *args)`` on the agent's host and wait for the value.

        A host that is restarting is waited for; an agent it no longer holds is activated
        from its store once.
        """
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        deadline = time.monotonic() + RESTART_WAIT
        activated = False
        while True:
            handle = self.handle(agent_id)
            try:
                got = ray.get(getattr(handle, method).remote(agent_id, *args), timeout=timeout)
            except GetTimeoutError:
                raise TimeoutError(
                    f"agent {agent_id!r} did not answer within {timeout} s"
                ) from None
            except RayActorError as exc:
                if time.monotonic() > deadline:
                    raise HostLostError(
                        f"the host of agent {agent_id!r} is gone and did not come back",
                        agent_id=agent_id,
                    ) from exc
                time.sleep(0.2)  # a restart takes a moment; nothing to wait on but time
                continue
            if isinstance(got, Missing):
                if activated:
                    raise AgentStoppedError(f"agent {agent_id!r} is not running")
                self.activate(agent_id)
                activated = True
                continue
            assert isinstance(got, Outcome)
            return got.get()

    # -- lanes --------------------------------------------------------------------------------

    def _deliver(self, host: int, inputs: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = self.handles[host].deliver.remote(inputs).future()
        return future

    def retry(self, entries: list[DriverEntry]) -> list[DriverEntry]:
        """What to send again of entries a host refused or lost, in their order.

        An entry whose host does not hold its agent goes again after the agent is activated
        from its store (once per agent); if it cannot be, the entry gives up with the reason.
        Runs on the client's pool while the lane waits.
        """
        again: list[DriverEntry] = []
        failures: dict[str, BaseException | None] = {}
        for entry in entries:
            if entry.missing:
                if entry.agent_id not in failures:
                    try:
                        self.activate(entry.agent_id)
                        failures[entry.agent_id] = None
                    except Exception as exc:
                        failures[entry.agent_id] = exc
                failure = failures[entry.agent_id]
                if failure is not None:
                    entry.give_up(failure)
                    continue
            again.append(entry.again())
        return again

    # -- RefHost: what an AgentRef calls --------------------------------------------------------

    def send(self, agent_id: str, message: Any, incarnation: str | None = None) -> None:
        """Deliver a message of an `AgentRef` to its agent, after those sent before it."""
        host = self.host_of(agent_id)
        if isinstance(message, OpenStream):
            with self.lock:
                self._streams[agent_id] = message.stream
            return
        entry: DriverEntry
        if isinstance(message, StartRun | ResumeRun) and isinstance(message.reply, HostReply):
            with self.lock:
                stream = self._streams.pop(agent_id, None)
            if isinstance(message, StartRun):
                entry = RunEntry(
                    self, agent_id, host, incarnation, "run", message.prompt,
                    message.reply.future, stream,
                )  # fmt: skip
            else:
                entry = RunEntry(
                    self, agent_id, host, incarnation, "resume", dict(message.answers),
                    message.reply.future, stream,
                )  # fmt: skip
        else:
            entry = TellEntry(self, agent_id, host, incarnation, message)
        self.lanes[host].put(entry)

    def ask(
        self, agent_id: str, message: Any, timeout: float, incarnation: str | None = None
    ) -> Any:
        """Ask an agent a `Query` in its own turn."""
        if not isinstance(message, Query):
            raise UserError(f"a RayRuntime agent answers queries only, not {message!r}")
        host = self.host_of(agent_id)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.lanes[host].put(AskEntry(self, agent_id, host, incarnation, message.what, future))
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"agent {agent_id!r} did not answer within {timeout} s") from None

    def status_of(self, agent_id: str, tree: Any = None) -> str:
        """An agent's status; ``stopped`` when no host holds it."""
        try:
            status: str = self.call(agent_id, "status", timeout=RESTART_WAIT)
        except AgentStoppedError:
            return "stopped"
        return status

    def tree_of(self, agent_id: str, tree: Any = None) -> TreeNode:
        """The tree under an agent, across hosts."""
        view: TreeNode = self.call(agent_id, "tree", timeout=RESTART_WAIT)
        return view

    def subscribe(self, agent_id: str, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` (on a driver thread) with each event of the agent's log."""
        key = uuid.uuid4().hex
        handle = self.handle(agent_id)
        self.call(agent_id, "subscribe", key, timeout=RESTART_WAIT)

        def ended(_outcome: Any) -> None:
            """Unsubscribed, or the agent stopped."""

        def failed(error: BaseException) -> None:
            _log.warning("a subscription ended: its host is gone", agent_id=agent_id)

        reader = OutboxReader(lambda: handle.pull.remote(key), ended, failed, put=callback)
        reader.start()

        def unsubscribe() -> None:
            handle.unsubscribe.remote(key)

        return unsubscribe

    def stop_agent(self, agent_id: str) -> None:
        """Stop an agent and its descendants; the driver forgets a root.

        What was sent to the agent before (a cancel) reaches it first.
        """
        host = self.host_of(agent_id)
        try:  # a message sent before the stop (a cancel) reaches the agent before it
            self.lanes[host].drained().result(RESTART_WAIT)
        except concurrent.futures.TimeoutError:
            _log.warning("stopping an agent whose host does not answer", agent_id=agent_id)
        wait_for(self.handles[host].stop.remote(agent_id))
        with self.lock:
            self.roots.pop(agent_id, None)
            self.where.pop(agent_id, None)

    def close(self) -> None:
        """Refuse what is sent from now on; stop the client's threads."""
        self.closed = True
        # Not cancel_futures: a retry queued there would leave its lane busy and its callers
        # waiting; it runs, and finds the client closed.
        self.pool.shutdown(wait=False)
