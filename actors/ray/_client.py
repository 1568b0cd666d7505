"""`RayClient`: the driver's side of the agent hosts, as an `AgentRef` addresses it.

An `AgentRef` of a `RayRuntime` is the same class as an in-process one; its host is this
client, which turns each message into a call to the agent's host. A run is one call that
returns with the run's end; a streamed run's events come through an outbox the client pulls.
When a host answers that it does not hold an agent of the directory (it was restarted), the
client activates the agent there from its store and tries once more; when a host dies under a
run, the run's caller gets `HostLostError`.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from actors._logging import get_logger
from actors.context._events import Event
from actors.exceptions import AgentStoppedError, HostLostError, UserError
from actors.loop._agent import Agent
from actors.loop._types import ResumeRun, StartRun
from actors.ray._outbox import Closed
from actors.ray._wire import Missing, Outcome, RootInfo, TreeSeed
from actors.runtime._host import HostReply, OpenStream, Query, settle
from actors.runtime._stream import TreeStream
from actors.runtime._tombstone import TreeNode

__all__ = ["RayClient", "Root", "wait_for"]

_log = get_logger("actors.ray")

RESTART_WAIT = 30.0  # how long a call waits for a restarting host


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


class _NoPassivation:
    def passivate(self, agent_id: str, timeout: float) -> bool:
        raise UserError(
            "RayRuntime does not passivate agents; use Runtime(idle_after=...) in one process"
        )


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
        # Hosts seen dying and not heard from since: a run sent to one that fails never
        # reached a live host, so it is sent again once the host is back.
        self._suspect: set[int] = set()
        self.virtual = _NoPassivation()
        self.pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="actors-ray")

    # -- where agents are -----------------------------------------------------------------------

    def host_of(self, agent_id: str) -> int:
        """The index of the host of an agent this driver knows."""
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
        import ray

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
            if ray.get(handle.holds.remote(agent_id), timeout=RESTART_WAIT) is not None:
                return  # another caller activated it meanwhile
            ray.get(
                [h.forget.remote(root.session_id, None) for h in self.handles], timeout=RESTART_WAIT
            )
            info = ray.get(
                handle.restore.remote(root.session_id, root.specs, root.seed),
                timeout=RESTART_WAIT,
            ).get()
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

    # -- RefHost: what an AgentRef calls --------------------------------------------------------

    def send(self, agent_id: str, message: Any, incarnation: str | None = None) -> None:
        """Deliver a message of an `AgentRef` to its agent's host."""
        host = self.host_of(agent_id)
        if isinstance(message, OpenStream):
            with self.lock:
                self._streams[agent_id] = message.stream
            return
        if isinstance(message, StartRun | ResumeRun) and isinstance(message.reply, HostReply):
            kind, payload = (
                ("run", message.prompt)
                if isinstance(message, StartRun)
                else ("resume", dict(message.answers))
            )
            with self.lock:
                stream = self._streams.pop(agent_id, None)
            self._run(agent_id, host, incarnation, kind, payload, message.reply.future, stream)
            return
        ref = self.handles[host].tell.remote(agent_id, incarnation, message)

        def told(done: concurrent.futures.Future[Any]) -> None:
            if done.exception() is None and isinstance(done.result(), Missing):
                self.pool.submit(self._tell_again, agent_id, incarnation, message)

        ref.future().add_done_callback(told)

    def _tell_again(self, agent_id: str, incarnation: str | None, message: Any) -> None:
        try:
            self.call(agent_id, "tell", incarnation, message)
        except Exception:
            _log.warning("message to an agent that is gone dropped", agent_id=agent_id)

    def _run(
        self,
        agent_id: str,
        host: int,
        incarnation: str | None,
        kind: str,
        payload: Any,
        future: concurrent.futures.Future[Any],
        stream: TreeStream | None,
        retried: bool = False,
    ) -> None:
        key = uuid.uuid4().hex if stream is not None else None
        handle = self.handles[host]
        with self.lock:
            suspect = host in self._suspect
        ref = handle.run.remote(agent_id, incarnation, kind, payload, key)
        if stream is not None and key is not None:

            def closed(outcome: Any) -> None:
                # A pull that failed (outcome None) leaves the verdict to the run's call.
                if isinstance(outcome, Outcome):
                    _settle(future, outcome)

            self._pull(handle, key, stream.put, closed)

        def ran(done: concurrent.futures.Future[Any]) -> None:
            error = done.exception()
            if error is not None:
                with self.lock:
                    self._suspect.add(host)
                if suspect and not retried:
                    self.pool.submit(
                        self._run_again, agent_id, incarnation, kind, payload, future, stream
                    )
                else:
                    settle(future, error=self._lost(agent_id, error))
                return
            with self.lock:
                self._suspect.discard(host)
            outcome = done.result()
            if isinstance(outcome, Missing):
                if retried:
                    settle(future, error=AgentStoppedError(f"agent {agent_id!r} is not running"))
                    return
                self.pool.submit(
                    self._run_again, agent_id, incarnation, kind, payload, future, stream
                )
            elif stream is None:
                _settle(future, outcome)

        ref.future().add_done_callback(ran)

    def _run_again(
        self,
        agent_id: str,
        incarnation: str | None,
        kind: str,
        payload: Any,
        future: concurrent.futures.Future[Any],
        stream: TreeStream | None,
    ) -> None:
        try:
            self.activate(agent_id)
        except Exception as exc:
            settle(future, error=exc)
            return
        self._run(
            agent_id,
            self.host_of(agent_id),
            incarnation,
            kind,
            payload,
            future,
            stream,
            retried=True,
        )

    def _lost(self, agent_id: str, cause: BaseException | None) -> HostLostError:
        error = HostLostError(
            f"the host of agent {agent_id!r} died during the run; what the run had in flight "
            "has an unknown outcome. Its log keeps what it did; the next call activates the "
            "agent from its store",
            agent_id=agent_id,
        )
        error.__cause__ = cause
        return error

    def _pull(
        self,
        handle: Any,
        key: str,
        put: Callable[[Any], None],
        closed: Callable[[Any], None],
    ) -> None:
        """Fetch an outbox's items as they come, until it closes (or its host dies)."""

        def got(done: concurrent.futures.Future[Any]) -> None:
            if done.exception() is not None:
                closed(None)
                return
            for item in done.result():
                if isinstance(item, Closed):
                    closed(item.outcome)
                    return
                try:
                    put(item)
                except Exception:
                    _log.exception("an outbox item could not be handed over")
            handle.pull.remote(key).future().add_done_callback(got)

        handle.pull.remote(key).future().add_done_callback(got)

    def ask(
        self, agent_id: str, message: Any, timeout: float, incarnation: str | None = None
    ) -> Any:
        """Ask an agent a `Query` in its own turn."""
        if not isinstance(message, Query):
            raise UserError(f"a RayRuntime agent answers queries only, not {message!r}")
        return self.call(agent_id, "query", incarnation, message.what, timeout=timeout)

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
        self._pull(handle, key, callback, lambda _outcome: None)

        def unsubscribe() -> None:
            handle.unsubscribe.remote(key)

        return unsubscribe

    def stop_agent(self, agent_id: str) -> None:
        """Stop an agent and its descendants; the driver forgets a root."""
        handle = self.handle(agent_id)
        wait_for(handle.stop.remote(agent_id))
        with self.lock:
            self.roots.pop(agent_id, None)
            self.where.pop(agent_id, None)

    def close(self) -> None:
        """Stop the client's threads."""
        self.pool.shutdown(wait=False, cancel_futures=True)


def _settle(future: concurrent.futures.Future[Any], outcome: Outcome) -> None:
    if outcome.error is not None:
        settle(future, error=outcome.error)
    else:
        settle(future, result=outcome.value)
