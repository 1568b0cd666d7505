"""The chat page in a real browser (headless Chromium), against a real server on loopback.

Skipped where Chromium or its driver is missing (``bash .ci/services/chromium.sh`` installs
Debian's), except under ``CI=true``, where a missing browser fails the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")

from actors.serve import create_app
from actors.store import SQLiteStore
from tests.trace_viewer import browser

from .agents import make_agent, tool_context
from .live import live_server

WAIT = 20.0
TOKEN = "page-token-123"


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    reason = browser.missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, but the browser test cannot run: {reason}")
        pytest.skip(reason)
    with browser.chromium() as driver:
        yield driver


class LastEventIds:
    """ASGI middleware that records the Last-Event-ID header of every request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"last-event-id":
                    self.seen.append(value.decode())
        await self.app(scope, receive, send)


def wait_for(driver: Any, script: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT).until(lambda d: d.execute_script(script))


def messages_text(driver: Any) -> str:
    return str(driver.execute_script("return document.getElementById('messages').innerText"))


def send(driver: Any, prompt: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "prompt")
    box.send_keys(prompt)
    driver.find_element(By.ID, "send").click()


def page_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_the_chat_page_runs_streams_approves_and_picks_a_stream_up_after_a_reload(
    driver: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    context = tool_context()
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = LastEventIds(
        create_app(make_agent(), store, tool_context=context, token=TOKEN, rate_limit=None)
    )
    try:
        with live_server(app) as url:
            driver.get(f"{url}/#token={TOKEN}")
            wait_for(driver, "return document.body.dataset.state === 'idle'")
            assert "token" not in driver.current_url  # taken out of the address bar
            assert not driver.find_element(By.ID, "token-form").is_displayed()
            driver.find_element(By.ID, "new-session").click()
            wait_for(driver, "return document.querySelectorAll('#sessions li.selected').length")
            session_id = driver.find_element(By.CSS_SELECTOR, "#sessions li.selected").text

            # A run with a subagent: its text, the tool card, and the tree with the child.
            send(driver, "team")
            wait_for(
                driver,
                "return document.body.dataset.state === 'idle' && "
                "document.getElementById('messages').innerText.includes('Finished:')",
            )
            assert "helper" in messages_text(driver)
            # Read in one script: the page may redraw the tree between two element lookups.
            tree = wait_for(
                driver,
                "const items = [...document.querySelectorAll('#tree li')];"
                "return items.length > 1 && items.map(li => [li.dataset.agent, "
                "li.firstChild.textContent.trim(), li.dataset.status]);",
            )
            assert tree[0][:2] == [session_id, "assistant"]
            assert tree[1][1:] == ["helper", "finished"]

            # An approval: buttons, and the run goes on once approved.
            send(driver, "approve")
            approve = ".approval button.approve:not([disabled])"
            wait_for(
                driver,
                f"return document.body.dataset.state === 'idle' && "
                f"document.querySelector('{approve}')",
            )
            driver.find_element(By.CSS_SELECTOR, approve).click()
            wait_for(
                driver,
                "return document.getElementById('messages').innerText"
                ".includes('Finished: deleted /tmp/x') && document.body.dataset.state === 'idle'",
            )
            assert not driver.find_elements(By.CSS_SELECTOR, ".approval")

            # A reload while a run waits: the page shows what it had and reads on from there.
            send(driver, "wait")
            wait_for(
                driver, "return document.querySelector('.tool[data-tool-call^=\"wait_gate\"]')"
            )
            last = driver.execute_script("return document.body.dataset.lastEventId")
            driver.refresh()
            wait_for(
                driver,
                "return document.body.dataset.state === 'streaming' && "
                "document.querySelector('.tool[data-tool-call^=\"wait_gate\"]')",
            )
            assert app.seen == [last]
            context["gate"].set()
            wait_for(
                driver,
                "return document.body.dataset.state === 'idle' && "
                "document.getElementById('messages').innerText.includes('the gate opened')",
            )
            text = messages_text(driver)
            assert text.count("Finished: the gate opened") == 1
            assert text.count("wait_gate") == 1
            assert page_errors(driver) == []
    finally:
        context["gate"].set()
        store.close()


def test_an_attached_image_is_sent_as_a_part_and_shown_in_the_transcript(
    driver: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    from actors.host.conformance import PNG

    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    store = SQLiteStore(tmp_path / "s.sqlite")
    app = create_app(make_agent(), store, tool_context=tool_context(), rate_limit=None)
    try:
        with live_server(app) as url:
            driver.get(url)
            wait_for(driver, "return document.body.dataset.state === 'idle'")
            driver.find_element(By.ID, "new-session").click()
            wait_for(driver, "return document.querySelectorAll('#sessions li.selected').length")
            driver.find_element(By.ID, "attach").send_keys(str(picture))
            chip = wait_for(
                driver,
                "const c = document.querySelector('#attached .chip');return c && c.textContent",
            )
            assert "dot.png" in chip
            send(driver, "world")
            wait_for(
                driver,
                "return document.body.dataset.state === 'idle' && "
                "document.getElementById('messages').innerText.includes('Hello, world!')",
            )
            # Drawn from the stored transcript: the image part, inline, with its bytes.
            src = wait_for(
                driver,
                "const i = document.querySelector('.msg.user img.part-image');"
                "return i && i.complete && i.naturalWidth === 1 && i.src",
            )
            assert src.startswith("data:image/png;base64,")
            assert (
                driver.execute_script("return document.querySelectorAll('#attached .chip').length")
                == 0
            )
            assert page_errors(driver) == []
    finally:
        store.close()
