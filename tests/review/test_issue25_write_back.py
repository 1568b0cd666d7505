"""Issue 25, item 2: what a tool reads from its read-only views goes back into any
`ContextUpdate` operation as the plain JSON it stands for, and the snapshot stays read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from actors import Agent, AgentContext, ContextUpdate, RunContext, ToolCall, tool
from actors.context._read_only import read_only
from actors.exceptions import ToolContextReadOnlyError
from actors.testing import ScriptedModel, SyncDriver, call

_METADATA: dict[str, Any] = {
    "todos": [{"title": "tea", "tags": ["home"]}],
    "prefs": {"ui": {"size": 1, "panes": [{"w": 2}]}},
    "who": "ada",
}


def _snapshot() -> RunContext[Any]:
    ctx = AgentContext(metadata=_METADATA)
    return ctx.run_context(ToolCall(id="c", name="t"), tool_context={"limits": _METADATA})


# Each builds an update from what the snapshot hands out; the expected folds are plain JSON.
_WRITES: list[tuple[str, Callable[[RunContext[Any]], ContextUpdate], dict[str, Any]]] = [
    (
        "set",
        lambda run: ContextUpdate().set("todos", [*run.metadata["todos"], {"title": "jam"}]),
        {"todos": [{"title": "tea", "tags": ["home"]}, {"title": "jam"}]},
    ),
    (
        "set a tuple",
        lambda run: ContextUpdate().set("copy", run.metadata["todos"]),
        {"copy": [{"title": "tea", "tags": ["home"]}]},
    ),
    (
        "merge",
        lambda run: ContextUpdate().merge("other", run.metadata["prefs"]),
        {"other": {"ui": {"size": 1, "panes": [{"w": 2}]}}},
    ),
    (
        "append",
        lambda run: ContextUpdate().append("done", run.metadata["todos"][0]),
        {"done": [{"title": "tea", "tags": ["home"]}]},
    ),
    (
        "the whole snapshot",
        lambda run: ContextUpdate().set("before", run.metadata),
        {"before": _METADATA},
    ),
    (
        "a tool_context view",
        lambda run: ContextUpdate().set("limits", run.tool_context["limits"]["todos"]),
        {"limits": [{"title": "tea", "tags": ["home"]}]},
    ),
]


@pytest.mark.parametrize(("name", "write", "added"), _WRITES, ids=[w[0] for w in _WRITES])
def test_a_value_read_from_the_snapshot_can_be_written_back(
    name: str, write: Callable[[RunContext[Any]], ContextUpdate], added: dict[str, Any]
) -> None:
    run = _snapshot()
    update = write(run)
    folded = update.fold(run.metadata)
    assert folded == {**_METADATA, **added}
    # Plain JSON all the way down: no view escapes into the metadata.
    assert ContextUpdate.from_json(update.to_json()) == update
    _assert_plain(folded)


def test_log_event_and_send_take_what_the_snapshot_hands_out() -> None:
    run = _snapshot()
    update = (
        ContextUpdate()
        .log_event("app.seen", {"todos": run.metadata["todos"], "prefs": run.metadata["prefs"]})
        .log_event("app.all", run.metadata)
        .send("peer", run.metadata["who"])
    )
    first, whole = update.events
    assert first.data == {"todos": _METADATA["todos"], "prefs": _METADATA["prefs"]}
    assert whole.data == _METADATA
    _assert_plain(first.data)
    _assert_plain(whole.data)
    assert update.sends[0].content == "ada"


def test_the_snapshot_stays_read_only() -> None:
    run = _snapshot()
    with pytest.raises(TypeError):
        run.metadata["todos"][0]["title"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError):
        run.metadata["new"] = 1  # type: ignore[index]
    with pytest.raises(ToolContextReadOnlyError):
        run.tool_context["limits"]["todos"].append(1)
    # And a write-back copies: the update does not share the snapshot's containers.
    update = ContextUpdate().set("prefs", run.metadata["prefs"])
    assert type(update.fold({})["prefs"]["ui"]) is dict


def test_a_tool_that_reads_appends_and_sets_back_runs_in_an_agent() -> None:
    @tool
    def add_todo(ctx: RunContext[Any], title: str) -> tuple[str, ContextUpdate]:
        """Add a to-do."""
        todos = list(ctx.metadata.get("todos") or ())
        todos.append({"title": title, "done": False})
        return f"{len(todos)} to do", ContextUpdate().set("todos", todos)

    model = ScriptedModel([call("add_todo", title="tea"), call("add_todo", title="jam"), "ok"])
    driver = SyncDriver(
        Agent("t", model=model, tools=[add_todo]), metadata={"todos": [{"title": "a"}]}
    )
    result = driver.run("plan")
    assert result.output == "ok"
    assert list(result.metadata["todos"]) == [
        {"title": "a"},
        {"title": "tea", "done": False},
        {"title": "jam", "done": False},
    ]
    tool_results = [e for e in driver.context.events if e.type == "tool_result"]
    assert [e.data.get("is_error", False) for e in tool_results] == [False, False]


def test_a_read_only_view_copies_like_the_data_it_shows() -> None:
    view = read_only({"a": [{"b": [1, 2]}], "c": (3,)})
    assert ContextUpdate().set("v", view).fold({}) == {"v": {"a": [{"b": [1, 2]}], "c": [3]}}


def _assert_plain(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _assert_plain(item)
    elif isinstance(value, list):
        for item in value:
            _assert_plain(item)
    else:
        assert isinstance(value, str | int | float | bool | type(None)), type(value)


def test_a_tool_that_returns_what_it_read_shows_the_model_json() -> None:
    @tool
    def show(ctx: RunContext[Any]) -> Any:
        """Show the to-dos."""
        return ctx.metadata["todos"]

    driver = SyncDriver(
        Agent("t", model=ScriptedModel([call("show"), "ok"]), tools=[show]),
        metadata={"todos": [{"title": "a"}]},
    )
    driver.run("show")
    (result,) = [e for e in driver.context.events if e.type == "tool_result"]
    assert result.data["content"] == '[{"title":"a"}]'
