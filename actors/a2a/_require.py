"""The one check that the A2A SDK is installed, with an error that names the extra."""

from __future__ import annotations

import importlib.util

__all__ = ["require_a2a"]

EXTRA_HINT = "pip install 'actors[a2a]'"


def require_a2a(what: str = "actors.a2a") -> None:
    """Raise `ImportError` naming the ``actors[a2a]`` extra if ``a2a-sdk`` is missing."""
    if importlib.util.find_spec("a2a") is None:
        raise ImportError(
            f"{what} needs the A2A SDK (the 'a2a-sdk' package, version 1); "
            f"install it with: {EXTRA_HINT}",
            name="a2a",
        )
