"""`SimulationSettings`: how a world's simulation is made, declared once, beside the world.

A world is run from Python, by ``actors simulate MODULE:WORLD`` and by `sweep`; each of them
makes the `Simulation`. Settings the world depends on (how long a peer message travels, how
long a tool takes) belong to the world, so they are declared on it, and every one of those
makes its simulation the same way: `Simulation.for_world`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from datetime import datetime
from typing import Any, TypeVar

from actors.exceptions import UserError
from actors.loop._loop import TreeLimits
from actors.models._model import Model
from actors.sim._host import Delay, Duration
from actors.sim._inflight import RateLimit

__all__ = ["SimulationSettings", "describe", "settings_of"]

W = TypeVar("W", bound=Callable[..., Any])

_ATTRIBUTE = "__actors_simulation_settings__"


@dataclasses.dataclass(frozen=True)
class SimulationSettings:
    """Every `Simulation` setting but the seed; a decorator that declares them for a world.

    Put it on the world function, and ``actors simulate``, `sweep` and `Simulation.for_world`
    all make the world's simulation with these settings (the seed, and any setting passed to
    them explicitly, override them)::

        @SimulationSettings(message_delay=1.0, tool_duration={"search": 2.0})
        def world(sim: Simulation, agents: int = 100) -> None: ...

        sim = Simulation.for_world(world, seed=7)  # what `actors simulate` makes
        world(sim, agents=100)

    The fields are `Simulation`'s arguments of the same names, with its defaults (``start``
    None: `EPOCH`).

    Example:
        >>> settings = SimulationSettings(message_delay=0.5)
        >>> settings.replace(tool_duration=1.0).options()["message_delay"]
        0.5
    """

    start: datetime | None = None
    limits: TreeLimits | None = None
    default_model: Model | None = None
    tool_duration: Duration = 0.0
    message_delay: Delay = 0.0
    record_events: bool = True
    max_in_flight: int = 64
    rate_limits: Mapping[str, RateLimit] | None = None
    concurrent_tools: bool | Collection[str] = False

    def replace(self, **changes: Any) -> SimulationSettings:
        """These settings with ``changes``.

        Raises:
            UserError: A name that is not a setting.
        """
        names = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise UserError(
                f"{', '.join(unknown)} {'is not a' if len(unknown) == 1 else 'are not'} "
                f"simulation setting{'s' if len(unknown) > 1 else ''}; the settings are "
                f"{', '.join(sorted(names))} (and the seed)"
            )
        return dataclasses.replace(self, **changes)

    def options(self) -> dict[str, Any]:
        """The settings as `Simulation` keyword arguments (those left at None omitted)."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) is not None
        }

    def __call__(self, world: W) -> W:
        """Declare these settings for ``world`` (used as a decorator); returns the world."""
        if not callable(world):
            raise UserError(f"SimulationSettings(...) decorates a world function, got {world!r}")
        setattr(world, _ATTRIBUTE, self)
        return world


def settings_of(world: Callable[..., Any]) -> SimulationSettings:
    """The settings ``world`` declared (`SimulationSettings` as its decorator), or defaults."""
    declared = getattr(world, _ATTRIBUTE, None)
    return declared if isinstance(declared, SimulationSettings) else SimulationSettings()


def describe(settings: SimulationSettings) -> dict[str, Any]:
    """The settings as JSON values (a function by its name), for a run's summary."""
    return {
        field.name: _json_value(getattr(settings, field.name))
        for field in dataclasses.fields(settings)
    }


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _json_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple | set | frozenset):
        return (
            sorted(_json_value(v) for v in value)
            if isinstance(value, set | frozenset)
            else [_json_value(v) for v in value]
        )
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    return repr(value)
