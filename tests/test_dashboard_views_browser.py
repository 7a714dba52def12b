"""The dashboard's addresses, folds, tracebacks, times and words, in a real chromium
against a real server, Valkey and Celery worker: a node panel has a URL that a reload,
back, forward and a shared link reopen; a fan-out of 25 folds and unfolds; a dead letter's
traceback unfolds as text; times show in the browser's zone, a schedule's in its own; a
node waiting for approval says what waits on whom."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright import Plan, PlanBuilder, RunStatus
from tests.support.api_server import ApiServer
from tests.support.browser import (  # noqa: F401 (browser, chromium: fixtures)
    body_data,
    browser,
    chromium,
    find_soon,
    log_in,
    open_run,
    save_screenshot,
    wait_for_node,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes

HOSTILE = '<img src=x onerror="window.pwned = 1">'


@pytest.fixture
def server(api: ApiServer, worker: Any) -> ApiServer:
    """The session's server over the in-process worker's databases (emptied for this test)."""
    return api


@pytest.fixture(autouse=True)
def no_script_errors(browser: Any) -> Iterator[None]:  # noqa: F811
    """No test here leaves a script error or a CSP refusal in the browser's console."""
    browser.get_log("browser")  # what earlier tests left
    yield
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []


def diamond() -> Plan:
    plan = PlanBuilder("Join two greetings built from one root")
    root = plan.function("a", "concat", params={"parts": ["hello"]})
    left = plan.function("b", "concat", params={"parts": ["left"]}, depends_on=[root])
    right = plan.function("c", "concat", params={"parts": ["right"]}, depends_on=[root])
    plan.function("d", "concat", params={"sep": " + "}, depends_on=[left, right])
    return plan.build(output="d")


def fan_out(width: int) -> Plan:
    plan = PlanBuilder(f"Fetch {width} sources, then summarise them")
    root = plan.function("plan", "concat", params={"parts": ["sources"]})
    fetches = [
        plan.function(f"fetch-{i:02d}", "concat", params={"parts": [str(i)]}, depends_on=[root])
        for i in range(width)
    ]
    plan.function("summary", "concat", depends_on=fetches)
    return plan.build(output="summary")


def panel_node(driver: Any) -> str | None:
    return driver.execute_script(
        "const panel = document.getElementById('panel');"
        "const title = panel.querySelector('h2');"
        "return panel.dataset.node && title ? title.textContent : null;"
    )


def wait_for_panel(driver: Any, node: str | None) -> None:
    wait_until(lambda: panel_node(driver) == node, timeout=15, what=f"the panel of {node}")


def fragment(driver: Any) -> str:
    return str(driver.execute_script("return location.hash"))


def test_a_node_panel_has_an_address_that_reload_back_forward_and_a_link_reopen(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    run = server.client.submit(diamond())
    assert run.wait(timeout=30).status == RunStatus.SUCCEEDED
    log_in(browser, server)
    open_run(browser, server, run.run_id)
    browser.find_element("css selector", "[data-node='b']").click()
    wait_for_panel(browser, "b")
    assert fragment(browser) == "#node=b"
    browser.find_element("css selector", "[data-node='c']").click()
    wait_for_panel(browser, "c")
    assert fragment(browser) == "#node=c"
    selected = browser.find_element("css selector", "[data-node='c']")
    assert selected.get_attribute("data-selected") is not None  # its box outlined

    browser.back()
    wait_for_panel(browser, "b")
    assert fragment(browser) == "#node=b"
    browser.back()
    wait_until(lambda: fragment(browser) == "", timeout=10, what="the address without a node")
    wait_for_panel(browser, None)
    browser.forward()
    wait_for_panel(browser, "b")

    browser.refresh()
    wait_until(lambda: body_data(browser, "graphDrawnMs"), timeout=30, what="drawn again")
    wait_for_panel(browser, "b")
    browser.get("about:blank")  # a link sent by a colleague: a fresh page
    browser.get(f"{server.url}/runs/{run.run_id}#node=d")
    wait_for_panel(browser, "d")
    assert "succeeded" in browser.find_element("css selector", "#panel dl.facts").text


def test_an_unknown_node_in_the_address_is_said_so_as_text(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    from urllib.parse import quote

    run = server.client.submit(diamond())
    run.wait(timeout=30)
    log_in(browser, server)
    browser.get(f"{server.url}/runs/{run.run_id}#node=nope")
    note = find_soon(browser, "#panel p.missing")
    assert note.text.startswith("This run has no node named \u201cnope\u201d.")
    browser.get("about:blank")
    browser.get(f"{server.url}/runs/{run.run_id}#node={quote(HOSTILE)}")
    note = find_soon(browser, "#panel p.missing")
    assert HOSTILE in note.text  # shown as text, never as markup
    assert browser.find_elements("css selector", "#panel img") == []
    assert browser.execute_script("return window.pwned || null") is None


def test_a_fan_out_of_25_is_one_box_that_unfolds_and_folds_again(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    from selenium.webdriver.common.by import By

    run = server.client.submit(fan_out(25))
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED
    log_in(browser, server)
    open_run(browser, server, run.run_id)
    assert browser.find_element(By.ID, "graph-note").text == "27 nodes drawn as 3 boxes"
    group = browser.find_element(By.CSS_SELECTOR, "#graph .item.group")
    assert group.find_element(By.CSS_SELECTOR, ".name").text == "fetch-… \u00d725"
    assert int(browser.find_element(By.ID, "graph").get_attribute("height")) < 200

    group.click()
    find_soon(browser, "#panel button.expand").click()
    wait_until(
        lambda: browser.find_element(By.ID, "graph-note").text == "27 nodes drawn as 27 boxes",
        timeout=15,
        what="the fan-out unfolded",
    )
    fold = find_soon(browser, "#folds button.fold")
    assert fold.text == "Fold fetch-… \u00d725 again"
    fold.click()
    wait_until(
        lambda: browser.find_element(By.ID, "graph-note").text == "27 nodes drawn as 3 boxes",
        timeout=15,
        what="the fan-out folded again",
    )
    assert browser.find_elements(By.CSS_SELECTOR, "#folds button") == []


def test_a_dead_letters_traceback_unfolds_as_text(
    browser: Any,  # noqa: F811
    server: ApiServer,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    plan = PlanBuilder("Research a company whose name is markup")
    plan.function("research", "fails_on_until_fixed", params={"item": HOSTILE, "bad": HOSTILE})
    run = server.client.submit(plan.build())
    assert run.wait(timeout=30).status == RunStatus.FAILED
    [letter] = server.client.dlq.list()
    stored = server.client.dlq.get(letter.id).traceback
    assert "Traceback" in stored and HOSTILE in stored

    log_in(browser, server, path=f"/dlq?run_id={run.run_id}")
    wait_until(lambda: body_data(browser, "loaded"), timeout=10, what="the dead letters")
    row = browser.find_element(By.CSS_SELECTOR, f"tr[data-letter='{letter.id}']")
    assert row.find_elements(By.CSS_SELECTOR, "pre.traceback") == []  # folded: not read yet
    row.find_element(By.CSS_SELECTOR, "details.traceback summary").click()
    shown = find_soon(browser, f"tr[data-letter='{letter.id}'] pre.traceback")
    text = browser.execute_script("return arguments[0].textContent", shown)
    assert text == stored  # as stored (redacted when stored), every line
    assert browser.find_elements(By.CSS_SELECTOR, "#letters img") == []
    assert browser.execute_script("return window.pwned || null") is None
    overflow = browser.execute_script("return getComputedStyle(arguments[0]).overflow", shown)
    assert overflow == "auto"  # a long one scrolls inside its box
    save_screenshot(browser, tmp_path, "dashboard-dlq.png")


@pytest.fixture
def in_tokyo(browser: Any) -> Iterator[Any]:  # noqa: F811
    """The browser's time zone set to Asia/Tokyo (UTC+9, no summer time) for one test."""
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Tokyo"})
    try:
        yield browser
    finally:
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_times_show_in_the_browsers_zone_and_a_schedules_in_its_own(
    in_tokyo: Any, server: ApiServer
) -> None:
    from datetime import timedelta

    run = server.client.submit(diamond())
    started_at = run.wait(timeout=30).nodes["a"].started_at
    assert started_at is not None
    log_in(in_tokyo, server)
    in_tokyo.get(f"{server.url}/runs/{run.run_id}#node=a")
    wait_for_panel(in_tokyo, "a")
    started = in_tokyo.find_element("css selector", "#panel dl.facts time")
    tokyo = started_at + timedelta(hours=9)
    assert started.text == f"{tokyo:%Y-%m-%d %H:%M:%S} GMT+9"
    assert started.get_attribute("title") == f"{started_at:%Y-%m-%d %H:%M:%S} UTC"

    plan = PlanBuilder("Nightly digest")
    plan.function("digest", "concat", params={"parts": ["digest"]})
    server.client.schedules.add(
        "nightly", cron="0 3 * * *", timezone="Europe/Paris", plan=plan.build()
    )
    in_tokyo.get(f"{server.url}/schedules")
    shown = find_soon(in_tokyo, "tr[data-schedule='nightly'] td.next-fire time")
    assert re.search(r" 03:00:00 GMT\+[12]$", shown.text)  # Paris's clock, not Tokyo's
    assert re.search(r" 0[12]:00:00 UTC$", shown.get_attribute("title"))


def test_a_node_waiting_for_approval_says_what_waits_on_whom(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    plan = PlanBuilder("Release once approved")
    plan.node(
        "deploy", "function", function="concat", params={"parts": ["v1"]}, approval="required"
    )
    run = server.client.submit(plan.build())
    wait_until(lambda: server.client.approvals.list(run.run_id), timeout=30, what="waiting")
    log_in(browser, server, path=f"/runs/{run.run_id}#node=deploy")
    wait_for_node(browser, "deploy", "waiting_approval")
    asks = find_soon(browser, "#panel p.asks").text
    assert asks.startswith("The start of function node deploy waits for a person's approval.")
    assert "approval: node function" not in browser.find_element("id", "panel").text


def test_filtering_the_runs_list_starts_no_second_refresh_timer(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    """The runs list reads its first page every 5 s: once, however often it is filtered
    (each Filter click started another timer, each a read of the runs every 5 s)."""
    from selenium.webdriver.common.by import By

    counting = browser.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {
            "source": "window.timers = 0; const started = window.setInterval;"
            "window.setInterval = (...args) => { window.timers += 1; return started(...args); };"
        },
    )
    try:
        log_in(browser, server)
        wait_until(lambda: body_data(browser, "loaded"), timeout=10, what="the runs list")
        for _ in range(3):
            browser.find_element(By.CSS_SELECTOR, "#filters button[type=submit]").click()
        assert browser.execute_script("return window.timers") == 1
    finally:
        browser.execute_cdp_cmd(
            "Page.removeScriptToEvaluateOnNewDocument", {"identifier": counting["identifier"]}
        )
