"""A real chromium for the dashboard's tests: Debian's ``chromium`` driven by Debian's
``chromium-driver`` through Selenium, headless. Nothing is downloaded: the driver's path
is given, so Selenium Manager never runs.

Without the browser the tests are skipped, unless ``DAGWRIGHT_REQUIRE_BROWSER=1`` (CI sets
it): then a missing browser fails them, so CI cannot go green by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("DAGWRIGHT_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("DAGWRIGHT_CHROMEDRIVER", "/usr/bin/chromedriver"))
WINDOW = (1400, 900)


def browser_missing() -> str | None:
    """Why no browser can run here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing (pip install -e '.[test]')"
    return None


def skip_or_fail_without_browser() -> None:
    reason = browser_missing()
    if reason is None:
        return
    if os.environ.get("DAGWRIGHT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"DAGWRIGHT_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def chromium_options() -> object:
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",  # chromium refuses to run as root with its sandbox
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


def new_driver() -> object:
    """A headless chromium session (the caller quits it)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=chromium_options())


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    """One browser for a test module (a start costs a second or two)."""
    skip_or_fail_without_browser()
    driver = new_driver()
    try:
        yield driver
    finally:
        driver.quit()  # type: ignore[attr-defined]


@pytest.fixture
def browser(chromium: object) -> Iterator[object]:
    """The module's browser with no cookies from a previous test; it leaves the site
    after the test, so that no page keeps an event stream open on a server that stops."""
    chromium.delete_all_cookies()  # type: ignore[attr-defined]
    yield chromium
    chromium.get("about:blank")  # type: ignore[attr-defined]
