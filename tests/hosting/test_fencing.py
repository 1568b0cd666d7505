"""An agent that another host took over (fenced it in the store) starts nothing more here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors import Agent, Runtime
from actors.exceptions import RunFailedError
from actors.store import SQLiteStore
from actors.store._fences import fence
from actors.testing import FunctionModel

BOUND = 30.0


def test_an_agent_fenced_out_asks_no_model_and_writes_nothing(tmp_path: Path) -> None:
    asked: list[int] = []

    def reply(messages: list[Any], tools: list[Any]) -> str:
        asked.append(len(messages))
        return "hi"

    spec = Agent("chat", model=FunctionModel(reply))
    db = tmp_path / "s.db"
    with SQLiteStore(db) as mine, SQLiteStore(db) as theirs, Runtime() as runtime:
        ref = runtime.open_session(spec, session_id="u1", store=mine)
        assert ref.run("hello", timeout=BOUND).output == "hi"
        # Its claim lapsed (as a host cut off from its database loses it), and another host
        # took the agent over: this one is a zombie now.
        mine.release("u1")
        assert fence(theirs, "u1") == 1
        before = theirs.last_seq("u1", ref.agent_id)
        with pytest.raises(RunFailedError, match="taken over by another host"):
            ref.run("are you still there?", timeout=BOUND)
        assert asked == [1]  # the second run never reached the model
        assert theirs.last_seq("u1", ref.agent_id) == before
