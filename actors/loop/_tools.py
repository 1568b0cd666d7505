"""Tools the model may call.

`Tool` wraps a function with the JSON schema of its arguments, validates a call and invokes it
with a `RunContext`; `@tool` makes one; `ToolResult` carries content with updates.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast, get_origin, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from actors.context._run_context import RunContext
from actors.exceptions import ModelRetry, ToolDefinitionError
from actors.loop._docstrings import parse_docstring
from actors.models._model import ToolDefinition

__all__ = ["Tool", "ToolResult", "tool"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result with an explicit error flag.

    Return ``ToolResult("no such file", is_error=True)`` to tell the model the call failed
    without raising.
    """

    output: Any
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class RetryRequested:
    """A tool raised `ModelRetry`: what `Tool.invoke` returns instead of raising it."""

    message: str


def _takes_ctx(annotation: Any) -> bool:
    return annotation is RunContext or get_origin(annotation) is RunContext


@dataclass(frozen=True)
class Tool:
    """A function the model can call.

    Build one with `tool` (a decorator) or `Tool.from_function`. The function may be sync or
    async; its first parameter may be a `RunContext`; the other parameters are the tool's
    arguments, validated by pydantic from their type hints. The model sees a JSON schema built
    from the hints and the Google-style docstring (its summary and ``Args:`` descriptions).

    A tool may return a value (serialized for the model), ``(value, ContextUpdate)`` (or a bare
    ``ContextUpdate``), a `ToolResult`, a `Pending` (to wait for the host), or — legacy, for
    code written for the seeds — a dict with an ``__update_context__`` mapping, which becomes
    ``set`` operations. It may raise `actors.exceptions.ModelRetry` to send the model back with
    a message; that counts against its retry budget, like arguments that fail validation.

    Attributes:
        name: The name the model calls it by.
        description: What the model reads about it.
        function: The wrapped function.
        parameters: The JSON schema of its arguments.
        takes_ctx: Whether the function's first parameter is a `RunContext`.
        is_async: Whether the function is a coroutine function.
        max_retries: How many times in one run its arguments may fail validation (or the tool
            raise `ModelRetry`) before the run fails; None uses the agent's ``tool_retries``.
        timeout: Seconds before a call is abandoned; None uses the agent's ``tool_timeout``.
        requires_approval: Whether a call must be approved by the host before it runs.
        sequential: Whether the calls of this tool in one model reply run one after another
            (in call order) instead of in parallel, each seeing the metadata updates of the
            ones before it in its ``ctx.metadata`` snapshot: the way to read a value, change
            it and write it back when the model calls the tool several times at once.
    """

    name: str
    description: str
    function: Callable[..., Any]
    args_model: type[BaseModel] = field(repr=False)
    parameters: dict[str, Any] = field(repr=False)
    takes_ctx: bool = False
    is_async: bool = False
    max_retries: int | None = None
    timeout: float | None = None
    requires_approval: bool = False
    sequential: bool = False

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        max_retries: int | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        sequential: bool = False,
    ) -> Tool:
        """Make a tool of ``function``.

        Args:
            function: A sync or async function; its first parameter may be a `RunContext`.
            name: The tool's name; the function's name by default.
            description: What the model reads; the docstring's summary by default.
            max_retries: The validation retry budget (default: the agent's ``tool_retries``).
            timeout: Seconds before a call is abandoned (default: the agent's ``tool_timeout``).
            requires_approval: Hold every call until the host approves it.
            sequential: Run the calls of one model reply one after another, each seeing the
                updates of the ones before it.

        Raises:
            ToolDefinitionError: the function cannot become a tool (e.g. ``*args``, or a hint
                pydantic cannot validate).
        """
        if not callable(function):
            raise ToolDefinitionError(f"a tool wraps a function, got {function!r}")
        tool_name = name or getattr(function, "__name__", None)
        if not tool_name or not tool_name.replace("_", "a").replace("-", "a").isalnum():
            raise ToolDefinitionError(
                f"tool name {tool_name!r} must be letters, digits, '_' or '-'; pass name=..."
            )
        if timeout is not None and timeout <= 0:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: timeout must be positive, got {timeout}"
            )
        for flag, value in (("requires_approval", requires_approval), ("sequential", sequential)):
            if not isinstance(value, bool):
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: {flag} must be a bool, got {value!r}"
                )
        summary, arg_docs = parse_docstring(inspect.getdoc(function))
        signature = inspect.signature(function)
        try:
            hints = get_type_hints(function, include_extras=True)
        except Exception as exc:  # a hint naming an undefined type: say which tool
            raise ToolDefinitionError(
                f"tool {tool_name!r}: cannot read its type hints: {exc}"
            ) from exc
        params = list(signature.parameters.values())
        takes_ctx = bool(params) and (
            _takes_ctx(hints.get(params[0].name, params[0].annotation))
            # ``def tool(ctx, ...)`` without a hint: the name says what it is (never an argument
            # the model would be asked for).
            or (params[0].name == "ctx" and params[0].annotation is inspect.Parameter.empty)
        )
        fields: dict[str, Any] = {}
        for index, param in enumerate(params):
            if index == 0 and takes_ctx:
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: *{param.name} cannot be described to a model; "
                    "name each argument"
                )
            if _takes_ctx(hints.get(param.name)):
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: the RunContext must be the first parameter"
                )
            annotation = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            # A description=None here would erase one given in Annotated[..., Field(...)];
            # a default that is itself a Field(...) carries the default (and its description).
            doc = arg_docs.get(param.name) or None
            if isinstance(default, FieldInfo):
                if doc and default.description is None:
                    default = FieldInfo.merge_field_infos(default, description=doc)
                fields[param.name] = (annotation, default)
            elif doc:
                fields[param.name] = (annotation, Field(default=default, description=doc))
            else:
                fields[param.name] = (annotation, Field(default=default))
        try:
            with warnings.catch_warnings():
                # An argument may be called `json`, `schema` or `copy`: it shadows a method of
                # pydantic's BaseModel on the internal arguments model, which nothing here
                # calls. The warning would break test suites that turn warnings into errors.
                warnings.filterwarnings(
                    "ignore", message=r'Field name ".*" in ".*" shadows an attribute'
                )
                args_model = create_model(
                    f"{tool_name}_arguments",
                    __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                    **fields,
                )
            schema = args_model.model_json_schema()
        except Exception as exc:  # pydantic's schema errors have many types
            raise ToolDefinitionError(
                f"tool {tool_name!r}: its arguments cannot be described as JSON: {exc}"
            ) from exc
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return cls(
            name=tool_name,
            description=description if description is not None else summary,
            function=function,
            args_model=cast(type[BaseModel], args_model),
            parameters=schema,
            takes_ctx=takes_ctx,
            is_async=inspect.iscoroutinefunction(function),
            max_retries=max_retries,
            timeout=timeout,
            requires_approval=requires_approval,
            sequential=sequential,
        )

    @classmethod
    def from_schema(
        cls,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        function: Callable[..., Any],
        *,
        timeout: float | None = None,
        requires_approval: bool = False,
    ) -> Tool:
        """Make a tool whose arguments are described by a JSON schema, not by type hints.

        The schema is shown to the model as given; the arguments are passed through unchecked
        (only as a JSON object) to ``function(ctx, **arguments)``, which validates them or
        lets a remote service do it. Toolsets such as MCP servers build their tools this way.

        Args:
            name: The name the model calls it by.
            description: What the model reads about it.
            parameters: The JSON schema of its arguments (an object schema).
            function: ``async def function(ctx: RunContext, **arguments)`` (or sync).
            timeout: Seconds before a call is abandoned (default: the agent's
                ``tool_timeout``).
            requires_approval: Hold every call until the host approves it.

        Raises:
            ToolDefinitionError: the name or the schema cannot be used.
        """
        if not name or not name.replace("_", "a").replace("-", "a").isalnum():
            raise ToolDefinitionError(f"tool name {name!r} must be letters, digits, '_' or '-'")
        if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
            raise ToolDefinitionError(f"tool {name!r}: its parameters must be an object schema")
        schema = dict(parameters)
        schema.pop("title", None)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        args_model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="allow"))
        return cls(
            name=name,
            description=description,
            function=function,
            args_model=args_model,
            parameters=schema,
            takes_ctx=True,
            is_async=inspect.iscoroutinefunction(function),
            timeout=timeout,
            requires_approval=requires_approval,
        )

    @property
    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return ToolDefinition(self.name, self.description, self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments; returns them as keyword arguments.

        Raises:
            pydantic.ValidationError: the arguments do not fit the function's hints.
        """
        args_model = self.args_model
        if (
            type(arguments) is dict
            and not arguments
            and not args_model.model_fields
            and not args_model.__pydantic_decorators__.model_validators
            and args_model.__pydantic_post_init__ is None
        ):
            return {}  # a tool of no arguments, called with none: nothing to validate
        model = args_model.model_validate(dict(arguments))
        # Extra arguments exist only for schema-described tools (`from_schema`), which take
        # them all; a tool built from a function forbids them.
        extra = model.model_extra or {}
        return {**{name: getattr(model, name) for name in type(model).model_fields}, **extra}

    def invoke(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> Any:
        """Call the function with validated ``arguments`` (returns an awaitable if async).

        A `ModelRetry` the function raises comes back as a `RetryRequested` value.
        """
        if self.is_async:
            return self._invoke_async(ctx, arguments)
        try:
            return self._call(ctx, arguments)
        except ModelRetry as retry:
            return RetryRequested(retry.message)

    async def _invoke_async(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> Any:
        try:
            return await self._call(ctx, arguments)
        except ModelRetry as retry:
            return RetryRequested(retry.message)

    def _call(self, ctx: RunContext[Any], arguments: Mapping[str, Any]) -> Any:
        if self.takes_ctx:
            return self.function(ctx, **arguments)
        return self.function(**arguments)


def describe_validation_error(exc: ValidationError) -> str:
    """A compact, model-readable account of what was wrong with the arguments."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
    sequential: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    max_retries: int | None = None,
    timeout: float | None = None,
    requires_approval: bool = False,
    sequential: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a function into a `Tool`; use bare (``@tool``) or with options (``@tool(...)``).

    Example:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two numbers.
        ...
        ...     Args:
        ...         a: The first.
        ...         b: The second.
        ...     '''
        ...     return a + b
        >>> add.definition.parameters["properties"]["a"]
        {'description': 'The first.', 'type': 'integer'}
    """

    def wrap(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            fn,
            name=name,
            description=description,
            max_retries=max_retries,
            timeout=timeout,
            requires_approval=requires_approval,
            sequential=sequential,
        )

    if function is not None:
        return wrap(function)
    return wrap
