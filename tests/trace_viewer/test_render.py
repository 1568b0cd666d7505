"""The trace page: one self-contained file, its data embedded once, never injectable."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, tool
from actors.exceptions import SessionNotFoundError
from actors.store import MemoryStore, SQLiteStore
from actors.testing import ScriptedModel, call
from actors.trace import build_trace, render_trace, write_trace

from .sessions import demo_session, session_of, with_parts

HOSTILE = "</script><img src=x onerror=\"document.title='pwned'\"><!-- @@SCRIPT@@ \u2028 &amp;"


class Page(HTMLParser):
    """The elements of a page as a browser's parser finds them, and each script's text."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def data(self) -> dict[str, Any]:
        (text,) = [t for attrs, t in self.scripts if attrs.get("id") == "trace-data"]
        return json.loads(text)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def demo_page() -> str:
    with MemoryStore() as store:
        return render_trace(demo_session(store))


def test_the_page_loads_nothing_from_anywhere(demo_page: str) -> None:
    page = Page(demo_page)
    assert demo_page.startswith("<!DOCTYPE html>")
    names = {tag for tag, _ in page.tags}
    assert not names & {"link", "img", "iframe", "object", "embed", "base", "form"}
    for tag, attrs in page.tags:
        assert "src" not in attrs, tag
    assert [attrs for attrs, _ in page.scripts] == [
        {"type": "application/json", "id": "trace-data"},
        {},
    ]
    css = re.search(r"<style>(.*?)</style>", demo_page, re.S)
    assert css is not None
    assert "url(" not in css.group(1)
    assert "@import" not in css.group(1)


def test_only_the_viewer_script_may_run(demo_page: str) -> None:
    page = Page(demo_page)
    (policy,) = [
        attrs["content"]
        for tag, attrs in page.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy is not None
    assert "default-src 'none'" in policy
    (script,) = [text for attrs, text in page.scripts if not attrs]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1]


def test_every_event_is_embedded_once_with_its_payload() -> None:
    with MemoryStore() as store:
        session = demo_session(store)
    trace = build_trace(session)
    data = Page(render_trace(session)).data()
    assert [lane["id"] for lane in data["lanes"]] == [lane.agent_id for lane in trace.lanes]
    for lane, shown in zip(trace.lanes, data["lanes"], strict=True):
        assert [[*e[:2], e[3]] for e in shown["events"]] == [
            [e.seq, e.type, e.data] for e in lane.events
        ]
        assert len(shown["spans"]) == len(lane.spans)
        assert len(shown["markers"]) == len(lane.markers)
    assert data["session"]["events"] == trace.event_count
    assert data["total"] == [12, trace.usage.input_tokens, trace.usage.output_tokens, 10]


def test_times_are_microseconds_from_the_first_event() -> None:
    with MemoryStore() as store:
        session = demo_session(store)
    data = Page(render_trace(session)).data()
    lead = data["lanes"][0]
    assert lead["events"][0][2] == 0
    assert lead["events"][1][2] == 1000  # the fake clock: 1 ms an event
    turn = lead["spans"][0]
    assert turn[:2] == ["turn", 0]
    assert turn[2] == lead["events"][-1][2]
    assert turn[5] == [0, len(lead["events"]) - 1]  # its seqs as one inclusive range


def test_event_content_cannot_inject_markup() -> None:
    @tool
    def fetch() -> str:
        """Fetch a hostile page."""
        return HOSTILE

    agent = Agent("a", model=ScriptedModel([call("fetch"), HOSTILE]), tools=[fetch])
    text = render_trace(session_of(agent, HOSTILE))
    page = Page(text)
    assert "img" not in {tag for tag, _ in page.tags}
    assert len(page.scripts) == 2
    assert text.count("</script>") == 2  # the data's and the viewer's: none from the data
    assert "<!--" not in text
    contents = [e[3].get("content") for e in page.data()["lanes"][0]["events"]]
    assert contents.count(HOSTILE) == 3  # the prompt, the tool's result, the answer: intact


def test_the_tool_context_never_reaches_the_page() -> None:
    @tool
    def whoami() -> str:
        """Say who is asking."""
        return "someone"

    agent = Agent("a", model=ScriptedModel([call("whoami"), "hi"]), tools=[whoami])
    text = render_trace(session_of(agent, "hi", tool_context={"api_key": "sk-SECRET-42"}))
    assert "sk-SECRET-42" not in text
    assert "api_key" not in text


def test_write_trace_writes_the_page_of_a_stored_session(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        session = demo_session(store, "d1")
        written = write_trace(store, "d1", tmp_path / "trace.html")
        assert written == tmp_path / "trace.html"
        assert written.read_text(encoding="utf-8") == render_trace(session)
        with pytest.raises(SessionNotFoundError):
            write_trace(store, "nope", tmp_path / "nope.html")
    assert not (tmp_path / "nope.html").exists()


def test_an_empty_session_renders_a_page_that_says_so() -> None:
    with MemoryStore() as store:
        store.create_session("empty", root_agent_id="root")
        data = Page(render_trace(store.load("empty"))).data()
    assert data["lanes"] == []
    assert data["session"]["events"] == 0


def test_fork_points_are_marked_and_branches_linked(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.sqlite") as store:
        demo_session(store, "d1")
        root = store.load("d1").root_agent_id
        at = store.last_seq("d1", root) // 2
        store.fork("d1", "b1", at=at, root_agent_id="b1")
        write_trace(store, "d1", tmp_path / "trace-d1.html")
        write_trace(store, "b1", tmp_path / "trace-b1.html")
        original = Page((tmp_path / "trace-d1.html").read_text(encoding="utf-8")).data()
        fork = Page((tmp_path / "trace-b1.html").read_text(encoding="utf-8")).data()
    assert original["session"]["branches"] == [["b1", at]]
    assert original["session"]["forkedFrom"] is None
    marks = [m for m in original["lanes"][0]["markers"] if m[0] == "fork"]
    assert [(m[2], m[3]) for m in marks] == [("branch b1", at)]
    assert fork["session"]["forkedFrom"] == ["d1", at]
    assert fork["session"]["branches"] == []
    marks = [m for m in fork["lanes"][0]["markers"] if m[0] == "fork"]
    assert [(m[2], m[3]) for m in marks] == [("forked from d1", at)]


def test_images_are_embedded_once_as_thumbnails_and_big_parts_are_placeholders() -> None:
    session, parts = with_parts()
    page = render_trace(session)
    assert len(page) < 200_000  # the 20 MB document and the 3 MB image are not in it
    for part in parts.values():
        assert part.data[:200] not in page.replace(parts["small"].data, "")
    assert page.count(parts["small"].data) == 1  # the same screenshot twice: embedded once
    data = Page(page).data()
    assert data["media"] == {parts["small"].sha256: parts["small"].data_url()}
    (prompt,) = [e[3] for e in data["lanes"][0]["events"] if e[1] == "user_message"]
    text, small, again, large, pdf = prompt["content"]
    assert text == {"type": "text", "text": "record a"}
    assert small == again
    assert small == {
        "type": "image",
        "media_type": "image/png",
        "size": parts["small"].size,
        "sha256": parts["small"].sha256,
        "placeholder": "[image image/png, 1.1 kB]",
        "thumbnail": parts["small"].sha256,
    }
    assert "thumbnail" not in large
    assert large["placeholder"] == "[image image/png, 3.0 MB]"
    assert pdf["placeholder"] == "[document application/pdf, 20.0 MB, big.pdf]"


def test_images_are_drawn_only_from_the_page_itself(demo_page: str) -> None:
    (policy,) = [
        attrs["content"]
        for tag, attrs in Page(demo_page).tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy is not None
    assert "img-src data:;" in policy


def test_write_trace_of_a_stored_session_shows_its_images(tmp_path: Path) -> None:
    from actors import AgentContext, ImagePart, UserMessage
    from actors.store import AgentRecord

    from .sessions import png

    shot = ImagePart(data=png(40, 30), media_type="image/png")
    ctx = AgentContext("viewer")
    ctx.add_message(UserMessage(content=["look", shot]))
    with SQLiteStore(tmp_path / "s.db") as store:  # the image comes back from the blobs table
        store.create_session("s", root_agent_id="viewer")
        store.put_agent("s", AgentRecord("viewer", None, "viewer", "idle"))
        store.append_events("s", "viewer", ctx.events)
        path = write_trace(store, "s", tmp_path / "trace.html")
    data = Page(path.read_text(encoding="utf-8")).data()
    assert data["media"] == {shot.sha256: shot.data_url()}
