"""A real chromium for the dashboard's tests: Debian's ``chromium`` driven by Debian's
``chromium-driver`` through Selenium, headless. Nothing is downloaded: the driver's path
is given, so Selenium Manager never runs. Below the fixtures, what the tests do on the
pages: log in, open a run, read a node's box, wait for an element the scripts add.

Without the browser the tests are skipped, unless ``DAGWRIGHT_REQUIRE_BROWSER=1`` (CI sets
it): then a missing browser fails them, so CI cannot go green by skipping.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api_server import ApiServer
from tests.support.waiting import wait_until

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


# -- on the pages -------------------------------------------------------------------


def log_in(driver: Any, server: ApiServer, scope: str = "operate", path: str = "/") -> None:
    """Through the login form, as a person pastes a token."""
    from selenium.webdriver.common.by import By

    driver.get(f"{server.url}{path}")
    wait_until(lambda: "/login" in driver.current_url, timeout=10, what="the login page")
    driver.find_element(By.ID, "token").send_keys(server.token(scope))
    driver.find_element(By.ID, "login").click()
    wait_until(lambda: "/login" not in driver.current_url, timeout=10, what="logged in")


def body_data(driver: Any, name: str) -> Any:
    return driver.execute_script(f"return document.body.dataset.{name} || null")


def open_run(driver: Any, server: ApiServer, run_id: str) -> None:
    driver.get(f"{server.url}/runs/{run_id}")
    wait_until(lambda: body_data(driver, "graphDrawnMs"), timeout=30, what="the graph drawn")


def node_status(driver: Any, node: str) -> str | None:
    return driver.execute_script(
        "const box = document.querySelector(`[data-node='${arguments[0]}']`);"
        "return box ? box.dataset.status : null;",
        node,
    )


def node_fill(driver: Any, node: str) -> str:
    return str(
        driver.execute_script(
            "const rect = document.querySelector(`[data-node='${arguments[0]}'] rect`);"
            "return getComputedStyle(rect).fill;",
            node,
        )
    )


def wait_for_node(driver: Any, node: str, status: str, timeout: float = 30) -> None:
    wait_until(
        lambda: node_status(driver, node) == status, timeout=timeout, what=f"{node} {status}"
    )


def find_soon(driver: Any, css: str, timeout: float = 15) -> Any:
    """The first element matching ``css`` once the page's scripts have put it there."""
    return wait_until(
        lambda: next(iter(driver.find_elements("css selector", css)), None),
        timeout=timeout,
        what=css,
    )


def flash_text(driver: Any) -> str:
    return str(driver.execute_script("return document.getElementById('flash').textContent"))


def save_screenshot(driver: Any, tmp_path: Path, name: str) -> Path:
    """The page as a PNG under tmp, and in DAGWRIGHT_SCREENSHOT_DIR when that is set."""
    shot = tmp_path / name
    assert driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000  # a drawn page, not a blank one
    if directory := os.environ.get("DAGWRIGHT_SCREENSHOT_DIR"):
        Path(directory).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(directory) / name)
    return shot


def listed_runs(driver: Any) -> list[str]:
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll('#runs tr[data-run]')].map((r) => r.dataset.run)"
        )
    )


def drawn_nodes(driver: Any) -> set[str]:
    return set(
        driver.execute_script(
            "return [...document.querySelectorAll('#graph [data-node]')]"
            ".map((box) => box.dataset.node);"
        )
    )


def alert_of(driver: Any) -> Any:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return driver.switch_to.alert
    except NoAlertPresentException:
        return None
