"""Every error the library raises, in one tree.

Caller mistakes (a bad argument, a malformed blob) are distinct from failures that happen while a
run is under way (a model that misbehaved, a limit that was hit)::

    ActorsError
    ├── UserError                       a caller mistake; nothing was changed
    │   ├── InvalidUpdateError          a ContextUpdate that cannot be built or applied
    │   │   └── UnknownAgentError       a peer message to an agent its host does not know
    │   ├── SerializationError          a serialized context that cannot be read
    │   ├── ToolDefinitionError         a function that cannot become a tool
    │   ├── AgentDefinitionError        an Agent spec that does not hold together
    │   ├── ToolContextReadOnlyError    a tool tried to change its (read-only) tool_context
    │   ├── UnknownRequestError         an answer for a request that is not open
    │   ├── UnsupportedContentError     a message part the model does not take; nothing sent
    │   └── WireError                   a value that must cross to another process cannot
    ├── RunError                        a run ended without an answer; carries the partial work
    │   ├── LimitExceededError          a limit of the agent was hit
    │   │   ├── MaxIterationsExceeded
    │   │   ├── UsageLimitExceeded
    │   │   ├── ContextWindowExceeded   a request could not be made to fit the window
    │   │   └── BudgetExceeded          a request's worst case did not fit the tree's Budget
    │   ├── ToolRetriesExceeded         a tool kept failing validation past its retry budget
    │   ├── OutputValidationError       the final answer never matched the output type
    │   ├── RunTimeoutError             the run outlived its timeout and was cancelled
    │   ├── RunCancelledError           the run was cancelled
    │   └── RunFailedError              the model or the runtime failed during the run
    │       └── HostLostError           the process hosting the agent died during the run
    ├── ModelError                      a model could not give a reply
    │   ├── ModelHTTPError              the provider answered with an error status
    │   │   ├── ModelAuthenticationError
    │   │   └── ContextTooLongError     the request was more than the model's window
    │   ├── ModelTimeoutError
    │   ├── RemoteAgentError            a remote (A2A) agent failed, refused or was unreachable
    │   ├── UnexpectedModelResponse     the reply could not be understood
    │   ├── ModelRequestsDisabled       real model requests are switched off (test suites)
    │   ├── ModelFallbackError          every model of a FallbackModel failed
    │   └── CacheMissError              a replay-only CachedModel has no reply for a request
    ├── StoreError                      a session store could not do what was asked
    │   ├── SessionNotFoundError
    │   ├── SessionBusyError            another live store holds the session; nothing written
    │   ├── FencedWriteError            another writer took the agent over; nothing written
    │   ├── SchemaVersionError
    │   ├── CorruptStoreError
    │   ├── StoreConnectionError        the database server is unreachable, or the link broke
    │   ├── StoreAuthenticationError    the database server refused the credentials
    │   └── DatabaseNotFoundError       the database the store names does not exist
    ├── SweepError                      runs of a sweep failed; carries the other runs' rows
    ├── MCPProtocolError                an MCP server wrote what is not JSON-RPC; its calls fail
    ├── Cancelled                       raised by ``RunContext.raise_if_cancelled()`` in a tool
    ├── ModelRetry                      raised by a tool or output validator: the model tries again
    └── AgentStoppedError               the agent's actor is no longer running

`RunError` and its subclasses carry what the run had done when it stopped (``messages``,
``usage``), so a limit or a timeout never throws away the partial transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "ActorsError",
    "AgentDefinitionError",
    "AgentStoppedError",
    "BudgetExceeded",
    "CacheMissError",
    "Cancelled",
    "ContextTooLongError",
    "ContextWindowExceeded",
    "CorruptStoreError",
    "DatabaseNotFoundError",
    "FencedWriteError",
    "HostLostError",
    "InvalidUpdateError",
    "LimitExceededError",
    "MaxIterationsExceeded",
    "MCPProtocolError",
    "ModelAuthenticationError",
    "ModelError",
    "ModelFallbackError",
    "ModelHTTPError",
    "ModelRequestsDisabled",
    "ModelRetry",
    "ModelTimeoutError",
    "OutputValidationError",
    "RemoteAgentError",
    "RunCancelledError",
    "RunError",
    "RunFailedError",
    "RunTimeoutError",
    "SchemaVersionError",
    "SerializationError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreAuthenticationError",
    "StoreConnectionError",
    "StoreError",
    "SweepError",
    "ToolContextReadOnlyError",
    "ToolDefinitionError",
    "ToolRetriesExceeded",
    "UnexpectedModelResponse",
    "UnknownAgentError",
    "UnknownRequestError",
    "UnsupportedContentError",
    "UsageLimitExceeded",
    "UserError",
    "WireError",
]


class ActorsError(Exception):
    """Base class of every error raised by the library."""


class UserError(ActorsError, ValueError):
    """A caller mistake: an argument or input that cannot be used. Nothing was changed."""


class InvalidUpdateError(UserError):
    """A `ContextUpdate` that cannot be built or applied (bad key, non-JSON value, ...)."""


class UnknownAgentError(InvalidUpdateError):
    """A tool's `ContextUpdate.send` named an agent its host does not know (live or asleep).

    The whole update is refused and the tool's result becomes an error the model reads.
    """


class SerializationError(UserError):
    """A serialized context that cannot be read (unknown version, missing field, bad type)."""


class UnsupportedContentError(UserError):
    """A request holds a part the model does not take; it was refused before anything was sent.

    A kind or media type the model does not read (audio to a Claude model), a part given by
    URL where the model wants bytes, or one past the model's size limits. Send the content
    to a model that takes it (a `FallbackModel` tries its next model), convert it, or pass
    the model an ``accepts=`` that says what it really takes.

    Attributes:
        model: The model's name.
        part: The refused part, as a short description (``[audio audio/wav, 1.2 MB]``).
        media_type: The part's media type ("" when a URL part gives none).
        accepted: What the model takes, in words.
    """

    def __init__(
        self,
        message: str,
        model: str = "",
        part: str = "",
        media_type: str = "",
        accepted: str = "",
    ) -> None:
        super().__init__(message)
        self.model = model
        self.part = part
        self.media_type = media_type
        self.accepted = accepted

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        args = (str(self), self.model, self.part, self.media_type, self.accepted)
        return (type(self), args)


class ToolDefinitionError(UserError):
    """A function that cannot become a tool (bad signature, unsupported annotation)."""


class AgentDefinitionError(UserError):
    """An `Agent` spec that does not hold together (duplicate tool names, bad limits)."""


class ToolContextReadOnlyError(UserError, TypeError):
    """A tool tried to change its ``tool_context``, which tools see read-only.

    A mapping ``tool_context`` reaches tools as a deep read-only view: setting, deleting or
    updating a key (at any depth), or changing a list or set inside it, raises this error, and
    the caller's object stays as it was. It is a `TypeError` too, as for any read-only mapping.

    Attributes:
        path: Where the write was tried, such as ``tool_context['db']['hosts']``.
    """

    def __init__(self, message: str, *, path: str = "tool_context") -> None:
        super().__init__(message)
        self.path = path


class UnknownRequestError(UserError):
    """An answer was given for a request id that is not open (unknown or already answered)."""


class WireError(UserError):
    """A value that must cross to another process cannot be pickled.

    Raised by `actors.ray.RayRuntime` before anything starts, naming the value (an agent
    spec, a ``tool_context``, a store) and what in it did not pickle.
    """


class RunError(ActorsError):
    """A run ended without an answer.

    Attributes:
        messages: The transcript as it stood when the run stopped.
        usage: The usage of the run up to that point.
        agent_id: The agent whose run stopped.
    """

    def __init__(
        self,
        message: str,
        *,
        messages: Sequence[Any] = (),
        usage: Any = None,
        agent_id: str | None = None,
    ) -> None:
        super().__init__(message)
        # `Message`s and a `Usage`: named, not imported (this module is the lowest floor).
        self.messages: Sequence[Any] = tuple(messages)
        self.usage = usage
        self.agent_id = agent_id


class LimitExceededError(RunError):
    """A limit of the agent was hit; the agent stays usable for another run."""


class MaxIterationsExceeded(LimitExceededError):
    """The run made more model requests in one turn than the agent's `max_iterations`."""


class UsageLimitExceeded(LimitExceededError):
    """The run went past one of the agent's usage limits (requests, tool calls, tokens)."""


class ContextWindowExceeded(LimitExceededError):
    """A request could not be made to fit the agent's context window, even after compaction.

    What must stay in view (the system message, pinned messages, the current turn) is more
    than the window holds. Raise the window, pin less, or shorten what the turn carries.
    """


class BudgetExceeded(LimitExceededError):
    """A request's worst case did not fit what is left of the tree's `actors.Budget`.

    Nothing was sent: the reservation is refused before the request. A child that hits it
    ends its run with this error, which its parent's model receives as the child's error
    result; the parent lives on (its own next request may be refused in turn).
    """


class ToolRetriesExceeded(RunError):
    """A tool was called with bad arguments (or an unknown tool was named) too many times."""


class OutputValidationError(RunError):
    """The model's final answer never validated against the agent's output type."""


class RunTimeoutError(RunError):
    """The run outlived its timeout; the tree was cancelled."""


class RunCancelledError(RunError):
    """The run was cancelled before it finished."""


class RunFailedError(RunError):
    """The model or the runtime failed during the run; ``__cause__`` holds the failure."""


class HostLostError(RunFailedError):
    """The process hosting the agent (a Ray agent host) died while the run was in flight.

    What the run did before is in its log; what was in flight has an unknown outcome (a tool
    may have run). The host is restarted and the agent is activated from its store for the
    next run; a subagent's parent gets this error as the subagent call's result.
    """


class ModelError(ActorsError):
    """A model could not give a reply."""


class ModelHTTPError(ModelError):
    """The provider answered with an error status.

    Attributes:
        status_code: The HTTP status.
        body: A short excerpt of the response body (never the request, never a key).
    """

    def __init__(self, message: str, *, status_code: int, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class ModelAuthenticationError(ModelHTTPError):
    """The provider refused the credentials (401 or 403). Check the API key."""


class ContextTooLongError(ModelHTTPError):
    """The provider refused the request as longer than the model's context window.

    OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too long". An agent with
    compaction compacts and tries once more.
    """


class ModelTimeoutError(ModelError):
    """The provider did not answer in time, after every retry."""


class RemoteAgentError(ModelError):
    """A remote agent (an `actors.a2a.A2AAgent`) failed, refused the task or was unreachable.

    Attributes:
        url: The remote agent's URL.
        state: The remote task's last state (``"failed"``, ``"rejected"``, ``"canceled"``), or
            None when no task was reached (a transport or protocol error).
    """

    def __init__(self, message: str, url: str = "", state: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.state = state

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        return (type(self), (str(self), self.url, self.state))


class UnexpectedModelResponse(ModelError):
    """The provider's reply could not be understood (malformed JSON, missing fields)."""


class ModelRequestsDisabled(ModelError):
    """A network-backed model was asked to run while real model requests are switched off."""


class ModelFallbackError(ModelError):
    """Every model of a `actors.models.FallbackModel` failed (or the last one could not go on).

    Attributes:
        failures: ``(model name, error)`` for each model tried, in order; the last error is
            also the ``__cause__``.
    """

    def __init__(self, message: str, *, failures: Sequence[tuple[str, BaseException]]) -> None:
        super().__init__(message)
        self.failures: tuple[tuple[str, BaseException], ...] = tuple(failures)


class CacheMissError(ModelError):
    """A replay-only `CachedModel` was asked something its cache has no reply for.

    Record the reply first (``mode="record"`` or ``"auto"`` with the real model reachable), or
    check that the run asks what it asked when the cache was recorded.
    """


class StoreError(ActorsError):
    """A session store could not do what was asked."""


class SessionNotFoundError(StoreError, KeyError):
    """No session with that id exists in the store."""

    def __str__(self) -> str:
        # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else ""


class SessionBusyError(StoreError):
    """Another live store instance holds the session (`SessionStore.acquire`).

    Nothing was written. The holder stays the session's only writer until it releases the
    session, closes its store, or its process ends.

    Attributes:
        session_id: The session.
        holder_host: The host name of the holder's process, or None when it is not known.
        holder_pid: The holder's process id, or None when it is not known.
    """

    def __init__(
        self,
        message: str,
        session_id: str = "",
        holder_host: str | None = None,
        holder_pid: int | None = None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.holder_host = holder_host
        self.holder_pid = holder_pid

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        return (type(self), (str(self), self.session_id, self.holder_host, self.holder_pid))


class FencedWriteError(StoreError):
    """Another store instance took the agent over (it fenced it at a newer epoch).

    Nothing was written. A host that takes over an agent (it restores its tree after a crash,
    or adopts it on another machine) fences it in the store, so the host that ran it before,
    should it still be running, can never write to it again: it neither appends nor starts a
    run. The agent is the new writer's now; the old one should stop it.

    Attributes:
        session_id: The session.
        agent_id: The agent.
        epoch: The epoch of the fence that refused the write.
    """

    def __init__(self, message: str, session_id: str = "", agent_id: str = "", epoch: int = 0):
        super().__init__(message)
        self.session_id = session_id
        self.agent_id = agent_id
        self.epoch = epoch

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        return (type(self), (str(self), self.session_id, self.agent_id, self.epoch))


class SchemaVersionError(StoreError):
    """The store was written by a newer version of the library."""


class CorruptStoreError(StoreError):
    """The store file is not a readable database of this library."""


class StoreConnectionError(StoreError):
    """The store's database server cannot be reached, or the connection broke during a call.

    A call that failed this way may or may not have been committed: appending the same events
    again is harmless (a store skips events it already holds), so retrying is safe.
    """


class StoreAuthenticationError(StoreError):
    """The store's database server refused the credentials (user name or password).

    The message names the user, the host and the database, never the password.
    """


class DatabaseNotFoundError(StoreError):
    """The database that the store's connection string names does not exist on the server."""


class SweepError(ActorsError):
    """Runs of `actors.sim.sweep` failed: their world raised, or their worker process died.

    Every other run was run to its end, and its rows are kept here: a sweep of a thousand runs
    does not lose its results to one bad seed. A run whose worker died (``os._exit``, a signal,
    the out-of-memory killer) was run again alone, so the failure names the run that died, not
    a neighbour that shared the pool with it.

    Attributes:
        failures: One `actors.sim.SweepFailure` per failed run (seed, parameters, what went
            wrong), in the order of the sweep's runs.
        table: The rows of the runs that finished, as `sweep` would have returned them.
    """

    # The floor of exceptions is below the simulator's: its types are named, not imported.
    def __init__(self, message: str, *, failures: Sequence[Any], table: Any) -> None:
        super().__init__(message)
        self.failures: tuple[Any, ...] = tuple(failures)
        self.table = table

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep the attributes when the error crosses a process boundary (pickle).
        return (_sweep_error, (str(self), self.failures, self.table))


def _sweep_error(message: str, failures: Sequence[Any], table: Any) -> SweepError:
    return SweepError(message, failures=failures, table=table)


class MCPProtocolError(ActorsError):
    """An MCP server wrote something that is not a JSON-RPC message (a stray ``print``, say).

    The calls of its tools that were waiting fail at once with it (as error results for the
    model) instead of waiting for their timeout; the connection stays open for later calls.

    Attributes:
        server: The server's name.
    """

    def __init__(self, server: str, message: str) -> None:
        super().__init__(message)
        self.server = server


class Cancelled(ActorsError):
    """Raised inside a tool by `RunContext.raise_if_cancelled()` once its run is cancelled."""

    def __init__(self, reason: str = "cancelled", *args: Any) -> None:
        super().__init__(reason, *args)
        self.reason = reason


class ModelRetry(ActorsError):
    """Raise it in a tool or an output validator to send the model back with a message.

    The model gets ``message`` (as the tool's error result, or after its final answer) and
    tries again. Each retry counts against a budget, as a call with invalid arguments does: the
    tool's ``max_retries`` (else the agent's ``tool_retries``) for a tool, the agent's
    ``output_retries`` for an output validator. Past the budget the run fails with
    `ToolRetriesExceeded` or `OutputValidationError`.

    Example:
        >>> def positive(ctx, output: int) -> int:
        ...     if output <= 0:
        ...         raise ModelRetry("The answer must be positive; think again.")
        ...     return output

    Attributes:
        message: What the model reads.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = str(message)


class AgentStoppedError(ActorsError):
    """The agent's actor is no longer running; start a new one (or restore the session)."""
