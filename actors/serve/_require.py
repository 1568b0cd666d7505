"""The one check that starlette and uvicorn are installed, with an error naming the extra."""

from __future__ import annotations

import importlib.util

__all__ = ["require_serve"]

EXTRA_HINT = "pip install 'actors[serve]'"


def require_serve() -> None:
    """Raise `ImportError` naming the ``actors[serve]`` extra if starlette is missing."""
    for name in ("starlette", "uvicorn"):
        if importlib.util.find_spec(name) is None:
            raise ImportError(
                f"actors.serve needs {name!r}; install it with: {EXTRA_HINT}", name=name
            )
