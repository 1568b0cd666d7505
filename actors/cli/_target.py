"""Finding a user's agent from ``MODULE:AGENT`` (or ``path/to/file.py:AGENT``)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from actors import Agent
from actors.cli._errors import CliError

__all__ = ["load_agent", "normalize_target"]

_HINT = "write MODULE:AGENT (e.g. myapp.agents:assistant) or path/to/file.py:AGENT"


def _split(target: str) -> tuple[str, str]:
    module, sep, attr = target.rpartition(":")
    if not sep or not module or not attr:
        raise CliError(f"{target!r} does not name an agent", _HINT, code=2)
    return module, attr


def _is_path(module: str) -> bool:
    return module.endswith(".py") or os.sep in module or "/" in module


def normalize_target(target: str) -> str:
    """The target with a file path made absolute, so a later ``resume`` finds it from anywhere."""
    module, attr = _split(target)
    if _is_path(module):
        return f"{Path(module).expanduser().resolve()}:{attr}"
    return target


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise CliError(f"no file {path}", _HINT, code=2)
    name = f"actors_cli_target_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"cannot import {path}", "the file must be a Python module", code=2)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The file's own folder comes first, so it can import its neighbours.
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def _import_module(name: str) -> ModuleType:
    # Like ``python -m``: modules in the current directory can be found.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            raise CliError(
                f"cannot find module {name!r}",
                "run from the folder that holds it, set PYTHONPATH, or give a file path",
                code=2,
            ) from None
        raise


def load_agent(target: str) -> Agent[Any]:
    """Import ``MODULE:AGENT`` and return the agent spec it names.

    ``AGENT`` is an `Agent`, or a function taking no arguments that returns one.

    Raises:
        CliError: The module or attribute is missing, or it is not an agent.
    """
    module_name, attr = _split(target)
    module = (
        _import_file(Path(module_name)) if _is_path(module_name) else _import_module(module_name)
    )
    try:
        value = getattr(module, attr)
    except AttributeError:
        agents = sorted(k for k, v in vars(module).items() if isinstance(v, Agent))
        found = f"agents there: {', '.join(agents)}" if agents else "it defines no Agent"
        raise CliError(f"{module_name} has no attribute {attr!r}", found, code=2) from None
    if callable(value) and not isinstance(value, Agent):
        value = value()
    if not isinstance(value, Agent):
        raise CliError(
            f"{target} is a {type(value).__name__}, not an Agent",
            "point at an Agent spec, or a function with no arguments that returns one",
            code=2,
        )
    return value
