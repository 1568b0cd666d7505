"""The one check that the MCP SDK is installed, with an error that names the extra."""

from __future__ import annotations

import importlib.util

__all__ = ["require_mcp"]

EXTRA_HINT = "pip install 'actors[mcp]'"


def require_mcp() -> None:
    """Raise `ImportError` naming the ``actors[mcp]`` extra if the ``mcp`` SDK is missing."""
    if importlib.util.find_spec("mcp") is None:
        raise ImportError(
            "actors.mcp needs the official MCP SDK (the 'mcp' package, version 2); "
            f"install it with: {EXTRA_HINT}",
            name="mcp",
        )
