"""`quick_init`: a frozen, slotted dataclass built as fast as a mutable one.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), a name lookup and a bound method per field. The agent loop builds a
dozen frozen inputs and effects per step, so their construction was a twentieth of a
simulated step. `quick_init` gives such a class an ``__init__`` that calls each slot's own
setter instead: the same signature, defaults and default factories, and the class stays
frozen (assigning a field afterwards still raises ``FrozenInstanceError``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

__all__ = ["quick_init"]

T = TypeVar("T")


class _Factory:
    """The default of a field made by its default factory (shown as dataclasses show it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """Replace the ``__init__`` of a ``@dataclass(frozen=True, slots=True)`` class (see above).

    Raises:
        TypeError: ``cls`` is not a frozen, slotted dataclass whose fields are all set by
            ``__init__``, or it has a ``__post_init__``.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"quick_init takes a frozen, slotted dataclass, got {cls!r}")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init does not run __post_init__ ({cls.__name__})")
    namespace: dict[str, Any] = {"__quick_init_factory__": _FACTORY}
    arguments: list[str] = []
    lines: list[str] = []
    for index, field in enumerate(dataclasses.fields(cast(Any, cls))):
        if not field.init or field.kw_only:
            raise TypeError(f"quick_init takes positional init fields only ({cls.__name__})")
        name = field.name
        if name not in cls.__dict__:
            raise TypeError(f"quick_init takes fields of the class itself ({cls.__name__}.{name})")
        namespace[f"__quick_init_set_{index}__"] = cls.__dict__[name].__set__  # the slot's
        if field.default is not dataclasses.MISSING:
            namespace[f"__quick_init_default_{index}__"] = field.default
            arguments.append(f"{name}=__quick_init_default_{index}__")
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"__quick_init_make_{index}__"] = field.default_factory
            arguments.append(f"{name}=__quick_init_factory__")
            lines.append(
                f"    if {name} is __quick_init_factory__:\n"
                f"        {name} = __quick_init_make_{index}__()"
            )
        else:
            arguments.append(name)
        lines.append(f"    __quick_init_set_{index}__(__quick_init_self__, {name})")
    source = f"def __init__(__quick_init_self__, {', '.join(arguments)}):\n" + (
        "\n".join(lines) or "    pass"
    )
    exec(source, namespace)  # built above from the class's own field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 - a class attribute, replaced once
    return cls
