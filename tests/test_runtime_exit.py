"""A runtime left open does not keep the process alive at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_process_with_an_open_runtime_exits() -> None:
    script = textwrap.dedent(
        """
        from actors import Agent, Runtime
        from actors.testing import ScriptedModel

        runtime = Runtime()  # never shut down by the script
        ref = runtime.spawn(Agent("a", model=ScriptedModel(["hi"])))
        print(ref.run("hello").output)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "hi"
