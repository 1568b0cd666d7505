"""The trace page in a real browser: headless Chromium, from file://, with no network.

Skipped where Chromium or its driver is missing (``bash .ci/services/chromium.sh`` installs
Debian's), except under ``CI=true``, where a missing browser fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import Agent, tool
from actors.store import MemoryStore
from actors.testing import ScriptedModel, call
from actors.trace import render_trace

from . import browser
from .sessions import big_session, demo_session, session_of
from .test_render import HOSTILE

WAIT = 20.0
DEMO_LANES = ["lead", "lead-sub-1", "lead-sub-2", "lead-sub-3", "lead-sub-4"]


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    reason = browser.missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true, but the browser test cannot run: {reason}")
        pytest.skip(reason)
    with browser.chromium() as driver:
        yield driver


def open_page(driver: Any, path: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri())
    WebDriverWait(driver, WAIT).until(
        lambda d: d.execute_script("return document.body.dataset.rendered === 'true'")
    )


def page_errors(driver: Any) -> list[str]:
    """What the page logged at level SEVERE: script errors, refused requests, CSP violations."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def click(driver: Any, css: str, text: str | None = None) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if text in (None, e.text)]
    assert found, f"nothing matches {css} {text or ''}"
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", found[0])
    WebDriverWait(driver, WAIT).until(ec.element_to_be_clickable(found[0])).click()
    WebDriverWait(driver, WAIT).until(lambda d: d.find_element(By.ID, "details").is_displayed())
    return found[0]


def details(driver: Any) -> tuple[str, list[str]]:
    from selenium.webdriver.common.by import By

    title = driver.find_element(By.ID, "details-title").text
    payloads = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#details-events pre")]
    return title, payloads


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``actors demo --trace``, as a user runs it: a subprocess with its own ACTORS_HOME."""
    folder = tmp_path_factory.mktemp("demo")
    target = folder / "trace.html"
    env = {**os.environ, "ACTORS_HOME": str(folder / "home")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-m", "actors.cli", "demo", "--pace", "0", "--trace", str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert done.returncode == 0, done.stderr
    return target


def test_the_demo_trace_shows_a_lane_per_agent_with_its_bars_and_payloads(
    driver: Any, demo_page: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    open_page(driver, demo_page)
    lanes = driver.find_elements(By.CSS_SELECTOR, "#lanes .lane")
    assert [lane.get_attribute("data-agent") for lane in lanes] == DEMO_LANES
    for lane in lanes:
        bars = lane.find_elements(By.CSS_SELECTOR, ".bar")
        kinds = {bar.get_attribute("class").split()[1] for bar in bars}
        assert {"k-turn", "k-model"} <= kinds, lane.get_attribute("data-agent")
        for bar in bars:  # drawn inside the lane, and visible
            assert bar.size["width"] >= 2
            assert bar.location["y"] >= lane.location["y"]
    subagent_calls = lanes[0].find_elements(By.CSS_SELECTOR, ".bar.k-subagent")
    assert [bar.text for bar in subagent_calls] == [
        "web_researcher → lead-sub-1",
        "paper_researcher → lead-sub-2",
        "benchmark_researcher → lead-sub-3",
        "writer → lead-sub-4",
    ]

    # A tool call: its events, in order, with their payloads.
    click(driver, "#lanes .bar.k-tool", "run_benchmark")
    title, payloads = details(driver)
    assert title == "run_benchmark"
    event_types = [
        e.text for e in driver.find_elements(By.CSS_SELECTOR, "#details-events .event-head .type")
    ]
    assert event_types == ["suspended", "resumed", "tool_call", "context_update", "tool_result"]
    assert '"workload": "ping-pong"' in payloads[2]
    screenshot = tmp_path / "trace-demo.png"
    assert driver.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")

    # A subagent call points at its child's lane; a marker shows its one event.
    click(driver, "#lanes .bar.k-subagent", "writer → lead-sub-4")
    highlighted = driver.find_elements(By.CSS_SELECTOR, "#lanes .lane.highlight")
    assert [lane.get_attribute("data-agent") for lane in highlighted] == ["lead-sub-4"]
    click(driver, "#lanes .marker.m-suspended")
    title, payloads = details(driver)
    assert title == "suspended: approval lead-sub-3-req-8: Allow the tool 'run_benchmark' to run?"
    assert len(payloads) == 1
    assert '"kind": "approval"' in payloads[0]

    rows = driver.find_elements(By.CSS_SELECTOR, "#usage tbody tr")
    assert [row.find_element(By.CSS_SELECTOR, "td").text for row in rows] == [*DEMO_LANES, "total"]
    assert rows[-1].find_elements(By.CSS_SELECTOR, "td")[3].text == "12"
    assert page_errors(driver) == []


def test_hostile_event_content_stays_text_in_the_page(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    @tool
    def fetch() -> str:
        """Fetch a hostile page."""
        return HOSTILE

    agent = Agent("a", model=ScriptedModel([call("fetch"), HOSTILE]), tools=[fetch])
    page = tmp_path / "hostile.html"
    page.write_text(render_trace(session_of(agent, HOSTILE)), encoding="utf-8")
    open_page(driver, page)
    click(driver, "#lanes .bar.k-tool", "fetch")
    _, payloads = details(driver)
    # As JSON text, whole up to the line separator (which the text may show as a line break).
    shown = json.dumps(HOSTILE, ensure_ascii=False)[1:].split("\u2028")[0]
    assert "</script><img src=x onerror=" in shown
    assert any(shown in payload for payload in payloads)
    assert driver.title == "actors trace s"
    assert driver.find_elements(By.TAG_NAME, "img") == []
    assert page_errors(driver) == []


def test_a_ten_thousand_event_session_draws_quickly(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with MemoryStore() as store:
        session = big_session(store, events=10_000)
    started = time.perf_counter()
    text = render_trace(session)
    rendered_in = time.perf_counter() - started
    page = tmp_path / "big.html"
    page.write_text(text, encoding="utf-8")
    size = page.stat().st_size
    open_page(driver, page)
    drawn_ms = driver.execute_script("return window.traceRenderMs")
    loaded_ms = driver.execute_script(
        "return performance.getEntriesByType('navigation')[0].loadEventEnd"
    )
    bars = len(driver.find_elements(By.CSS_SELECTOR, "#lanes .bar"))
    events = sum(len(a.context["events"]) for a in session.agents)
    print(
        f"{events} events, {bars} bars: {size / 1e6:.2f} MB of HTML, rendered by Python in "
        f"{rendered_in * 1000:.0f} ms, drawn by the page in {drawn_ms:.0f} ms "
        f"(loaded in {loaded_ms:.0f} ms)"
    )
    assert events >= 10_000
    assert size < 4_000_000
    assert drawn_ms < 3_000  # typically ~200 ms on 2 cores; the bound is for slow CI
    assert rendered_in < 3.0
    # At this scale a call is a sliver: zoom in until one is wide enough to aim at.
    for _ in range(6):
        driver.find_element(By.ID, "zoom-in").click()
    wide = driver.execute_script(
        "return [...document.querySelectorAll('#lanes .bar.k-tool')]"
        ".find(bar => bar.getBoundingClientRect().width > 12)"
    )
    assert wide is not None
    driver.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", wide)
    wide.click()
    _, payloads = details(driver)
    assert "a plausible paragraph" in payloads[-1]
    assert page_errors(driver) == []


def test_a_fork_links_its_original_and_its_branches(driver: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from actors.store import SQLiteStore
    from actors.trace import write_trace

    with SQLiteStore(tmp_path / "s.sqlite") as store:
        demo_session(store, "d1")
        store.fork("d1", "b1", at=3, root_agent_id="b1")
        write_trace(store, "d1", tmp_path / "trace-d1.html")
        write_trace(store, "b1", tmp_path / "trace-b1.html")
    open_page(driver, tmp_path / "trace-d1.html")
    lineage = driver.find_element(By.ID, "lineage")
    assert lineage.text == "branches: b1 (after 3)"
    assert driver.find_elements(By.CSS_SELECTOR, ".marker.m-fork")
    link = lineage.find_element(By.TAG_NAME, "a")
    assert link.get_attribute("href") == (tmp_path / "trace-b1.html").resolve().as_uri()
    open_page(driver, tmp_path / "trace-b1.html")
    assert driver.find_element(By.ID, "lineage").text == "forked from d1 after its event 3"
    assert page_errors(driver) == []


def test_an_image_in_a_prompt_is_a_thumbnail_and_big_parts_are_placeholders(
    driver: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    from .sessions import with_parts

    session, parts = with_parts()
    target = tmp_path / "parts.html"
    target.write_text(render_trace(session), encoding="utf-8")
    open_page(driver, target)
    click(driver, "#lanes .bar.k-turn")
    thumbnails = driver.find_elements(By.CSS_SELECTOR, "#details-events .parts img.thumbnail")
    assert len(thumbnails) == 2  # the screenshot, twice in the prompt
    for image in thumbnails:
        assert image.get_attribute("src") == parts["small"].data_url()
        assert driver.execute_script("return arguments[0].naturalWidth", image) == 400
        assert image.size["height"] <= 160
    placeholders = [
        e.text for e in driver.find_elements(By.CSS_SELECTOR, "#details-events .part-placeholder")
    ]
    assert placeholders == [
        "[image image/png, 3.0 MB]",
        "[document application/pdf, 20.0 MB, big.pdf]",
    ]
    assert page_errors(driver) == []
