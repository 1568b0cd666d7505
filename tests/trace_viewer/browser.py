"""Headless Chromium for the trace viewer's tests, through Debian's chromedriver.

Run as a script to remake the screenshot of the docs from a fresh demo session::

    python tests/trace_viewer/browser.py docs/images/trace-viewer.png
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)


def missing() -> str | None:
    """Why the browser cannot run here, or None when it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (bash .ci/services/chromium.sh installs it)"
    return None


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[object]:
    """A headless Chromium WebDriver with a fresh profile, closed on exit.

    The driver binary is given explicitly, so Selenium Manager never looks for (or downloads)
    one.
    """
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="actors-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for get_log("browser")
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(service=service, options=options)
    # The page gets exactly width x height (the window's size would include its frame).
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot_of_demo(target: Path, *, width: int = 1280, height: int = 600) -> Path:
    """Run ``actors demo`` offline into a scratch folder and screenshot its trace.

    The benchmark call is clicked, so the picture shows the details panel too.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from actors.cli import main

    with tempfile.TemporaryDirectory(prefix="actors-trace-") as scratch:
        page = Path(scratch) / "trace.html"
        db = Path(scratch) / "sessions.sqlite"
        code = main(["demo", "--plain", "--pace", "0", "--db", str(db), "--trace", str(page)])
        assert code == 0, f"actors demo exited with {code}"
        with chromium(width, height) as driver:
            driver.get(page.as_uri())  # type: ignore[attr-defined]
            WebDriverWait(driver, 20).until(
                lambda d: d.execute_script("return document.body.dataset.rendered === 'true'")
            )
            bars = driver.find_elements(By.CSS_SELECTOR, "#lanes .bar.k-tool")  # type: ignore[attr-defined]
            next(bar for bar in bars if bar.text == "run_benchmark").click()
            driver.save_screenshot(str(target))  # type: ignore[attr-defined]
    return target


if __name__ == "__main__":
    import sys

    reason = missing()
    if reason is not None:
        sys.exit(f"cannot take the screenshot: {reason}")
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "trace-viewer.png")
    print(f"screenshot: {screenshot_of_demo(out)}")
