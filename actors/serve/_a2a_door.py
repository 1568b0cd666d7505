"""Whether ``serve`` opens the A2A door, and its routes (the SDK imported only when it does)."""

from __future__ import annotations

import importlib.util

from starlette.routing import BaseRoute

from actors.exceptions import UserError

__all__ = ["a2a_door", "a2a_installed"]


def a2a_installed() -> bool:
    """Whether the A2A SDK (``a2a-sdk``) can be imported."""
    return importlib.util.find_spec("a2a") is not None


def a2a_door(a2a: bool | None, *, bearer: bool) -> tuple[list[BaseRoute], frozenset[str]]:
    """The A2A routes and their public paths; none when ``a2a`` is False.

    Args:
        a2a: True to serve A2A (the SDK must be installed), False not to, None to serve it
            when the SDK is installed.
        bearer: Whether the agent card should say that requests need the bearer token.

    Raises:
        UserError: ``a2a`` is True and the SDK is missing.
    """
    if a2a is False or (a2a is None and not a2a_installed()):
        return [], frozenset()
    if not a2a_installed():
        raise UserError("serving A2A needs the A2A SDK; install it with: pip install 'actors[a2a]'")
    from actors.serve._a2a import a2a_public_paths, a2a_routes

    return a2a_routes(bearer=bearer), a2a_public_paths()
