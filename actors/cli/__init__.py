"""The ``actors`` command: the demo, running agents, and stored sessions.

Run ``actors --help``. From Python: ``actors.cli.main(["demo", "--plain"])`` returns the exit
code.
"""

from actors.cli._app import main

__all__ = ["main"]
