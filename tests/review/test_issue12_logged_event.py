"""Issue 12, finding 5: a `LoggedEvent` is checked when it is built, so a bad one never reaches
an agent's log or its store, and ``ref.context()`` never raises a raw pydantic error."""

from __future__ import annotations

from typing import Any

import pytest

from actors import Agent, AgentContext, ContextUpdate, LoggedEvent, Runtime, tool
from actors.exceptions import InvalidUpdateError
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call


@pytest.mark.parametrize(
    ("event_type", "data", "match"),
    [
        ("user_message", {"content": "hi"}, "cannot be logged by a tool"),
        ("suspended", {"request": {"id": "r"}}, "names without a dot belong to the framework"),
        ("replace", {}, "cannot be logged"),
        ("", {}, "cannot be logged"),
        (3, {}, "cannot be logged"),
        ("app.note", {"when": object()}, r"the data of event 'app.note'\['when'\] is a object"),
        ("app.note", {"n": float("nan")}, "not JSON"),
        ("app.note", ["a"], "must be a mapping"),
        ("app.note", None, "must be a mapping"),
    ],
)
def test_a_logged_event_is_refused_when_it_is_built(event_type: Any, data: Any, match: str) -> None:
    with pytest.raises(InvalidUpdateError, match=match):
        LoggedEvent(event_type, data)


def test_a_logged_event_keeps_a_copy_of_its_data() -> None:
    data: dict[str, Any] = {"items": [1]}
    event = LoggedEvent("app.note", data)
    data["items"].append(object())
    assert event.data == {"items": [1]}


def test_a_bad_event_slipped_into_an_update_never_reaches_the_log_or_the_store() -> None:
    @tool
    def sneaky() -> ContextUpdate:
        """Return an event whose data was changed after it was checked."""
        event = LoggedEvent("app.note", {"fine": True})
        event.data["bad"] = {1, 2}  # the dict is the event's own: change it after the check
        return ContextUpdate((event,)).set("also", "this")

    @tool
    def honest() -> ContextUpdate:
        """Log a good event."""
        return ContextUpdate().log_event("app.note", {"fine": True})

    model = ScriptedModel([call("sneaky"), "first", call("honest"), "second"])
    agent = Agent("a", model=model, tools=[sneaky, honest])
    with MemoryStore() as store, Runtime() as runtime:
        ref = runtime.spawn(agent, store=store, session_id="s")
        first = ref.run("go", timeout=10)
        (failed,) = [m for m in first.messages if m.role == "tool"]
        assert failed.is_error  # type: ignore[union-attr]
        assert "The tool's context update failed" in failed.content
        context = ref.context()  # never a raw pydantic error
        assert "also" not in context.metadata  # nothing of the update applied
        second = ref.run("again", timeout=10)  # the agent, and its store, still work
        assert second.output == "second"
        stored = store.load("s").agents[0].context
        live = ref.context()
    notes = [e for e in stored["events"] if e["type"] == "app.note"]
    assert [note["data"] for note in notes] == [{"fine": True}]  # the honest one only
    assert AgentContext.deserialize(stored).events == live.events


def test_log_event_builds_the_same_checked_event() -> None:
    update = ContextUpdate().log_event("app.note")
    (event,) = update.events
    assert (event.type, event.data) == ("app.note", {})
    with pytest.raises(InvalidUpdateError, match="cannot be logged by a tool"):
        ContextUpdate().log_event("user_message", {"content": "x"})
