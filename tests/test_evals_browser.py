"""The evals pages in a real chromium, against a real server and Valkey.

Evals are written into the store as the runner leaves them (tests/support/evals.py): the
list shows them; an eval's page colours each case-by-scorer cell by pass or fail, shows a
model's hostile output as text, and beside a baseline outlines the scorer that got worse
and shows both outputs. The page's screenshot is saved (to ``DAGWRIGHT_SCREENSHOT_DIR``
too when set: that is how docs/images/dashboard-eval.png is made).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagwright.evals.runner import eval_store
from dagwright.evals.store import EvalStore
from tests.support.api_server import ApiServer
from tests.support.browser import (  # noqa: F401 (browser, chromium: fixtures)
    body_data,
    browser,
    chromium,
    find_soon,
    flash_text,
    log_in,
    save_screenshot,
)
from tests.support.evals import (
    HOSTILE_OUTPUT,
    case_run,
    graded,
    passing_eval,
    saved_eval,
    worse_eval,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes


@pytest.fixture
def store(api: ApiServer) -> EvalStore:
    return eval_store(api.client)


def open_page(driver: Any, server: ApiServer, path: str) -> None:
    driver.get(f"{server.url}{path}")
    wait_until(lambda: body_data(driver, "loaded"), timeout=15, what=f"{path} loaded")


def cell_classes(driver: Any, case: str, scorer: str) -> set[str]:
    found = driver.execute_script(
        "const row = document.querySelector(`#matrix tr[data-case='${arguments[0]}']`);"
        "const cell = row && [...row.querySelectorAll('td[data-scorer]')]"
        "  .find((td) => td.dataset.scorer === arguments[1]);"
        "return cell ? cell.className : null;",
        case,
        scorer,
    )
    assert found is not None, f"no cell {case} x {scorer}"
    return set(str(found).split())


def test_the_list_shows_each_eval_with_its_pass_rate_and_links_to_it(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
    tmp_path: Path,
) -> None:
    older = passing_eval(store, ago_s=600)
    newer = worse_eval(store, ago_s=60)
    passing_eval(store, suite="other-suite", ago_s=30)
    log_in(browser, api, scope="read", path="/evals")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the evals list")
    listed = browser.execute_script(
        "return [...document.querySelectorAll('#evals tr[data-eval]')].map((r) => r.dataset.eval)"
    )
    assert listed[1:] == [newer, older]
    row = browser.find_element("css selector", f"tr[data-eval='{newer}']")
    assert "capitals" in row.text and "75%" in row.text and "finished" in row.text
    assert browser.find_element("css selector", "nav a[aria-current='page']").text == "Evals"

    row.find_element("link text", "capitals").click()  # the suite's evals only
    wait_until(lambda: "suite=capitals" in browser.current_url, timeout=10, what="filtered")
    wait_until(
        lambda: len(browser.find_elements("css selector", "#evals tr[data-eval]")) == 2,
        timeout=10,
        what="the suite's two evals",
    )
    save_screenshot(browser, tmp_path, "dashboard-evals.png")
    browser.find_element("link text", newer).click()
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the eval page")
    assert browser.current_url.endswith(f"/evals/{newer}")


def test_an_eval_page_colours_each_cell_and_shows_a_hostile_output_as_text(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
) -> None:
    eval_id = worse_eval(store)
    log_in(browser, api, scope="read", path=f"/evals/{eval_id}")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the eval page")
    assert {"score", "fail"} <= cell_classes(browser, "france", "contains:Paris")
    assert {"score", "pass"} <= cell_classes(browser, "japan", "contains:Paris")
    assert {"score", "pass"} <= cell_classes(browser, "france", "brief")
    assert "worse" not in cell_classes(browser, "france", "contains:Paris")  # no baseline
    judge_cell = "#matrix tr[data-case='france'] td[data-scorer='brief']"
    assert browser.find_element("css selector", judge_cell).text == "✓ 1.00 · grade 5"
    fail_colour = browser.execute_script(
        "return getComputedStyle(document.querySelector('#matrix td.score.fail')).backgroundColor"
    )
    assert fail_colour == "rgb(254, 215, 215)"  # --fail of dashboard.css: the CSS applied
    summary = browser.find_element("css selector", "#matrix tr.summary").text
    assert "50% passed" in summary and "100% passed" in summary

    browser.find_element("css selector", "tr[data-case='france'] details summary").click()
    output = find_soon(browser, "tr[data-case='france'] pre.output")
    assert output.text == HOSTILE_OUTPUT  # the markup, shown as text
    assert not browser.find_elements("css selector", "main img, main script")
    assert body_data(browser, "pwned") is None  # its onerror never ran
    facts = browser.find_element("id", "eval-facts").text
    assert "2 cases \u00d7 1 repeat" in facts and "1 asked, 1 from its cache" in facts
    assert browser.find_element("id", "eval-suite").text == "Suite capitals"


def test_repeats_show_the_mean_its_spread_and_the_passes_counted(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
    tmp_path: Path,
) -> None:
    eval_id = saved_eval(
        store,
        [
            case_run("france", "Paris", [graded("contains:Paris", 1.0, True)]),
            case_run("france", "Lyon", [graded("contains:Paris", 0.0, False)], repeat=1),
            case_run("japan", "Tokyo", [graded("contains:Paris", 0.0, False)]),
            case_run(
                "japan", "", [graded("contains:Paris", 0.0, False)], repeat=1, status="failed"
            ),
        ],
        repeat=2,
    )
    log_in(browser, api, scope="read", path=f"/evals/{eval_id}")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the eval page")
    assert {"score", "mixed"} <= cell_classes(browser, "france", "contains:Paris")
    assert {"score", "fail"} <= cell_classes(browser, "japan", "contains:Paris")
    assert {"score", "none"} <= cell_classes(browser, "japan", "brief")  # never graded
    cell = browser.find_element(
        "css selector", "tr[data-case='france'] td[data-scorer='contains:Paris']"
    )
    assert cell.text.splitlines() == ["0.50 ± 0.71", "1/2 passed"]
    browser.find_element("css selector", "tr[data-case='france'] details summary").click()
    outputs = browser.find_elements("css selector", "tr[data-case='france'] pre.output")
    assert [pre.text for pre in outputs] == ["Paris", "Lyon"]
    badges = browser.find_elements("css selector", "tr[data-case] th.case .badge")
    assert [(b.text, b.get_attribute("class")) for b in badges] == [("failed", "badge st-failed")]
    save_screenshot(browser, tmp_path, "dashboard-eval-repeats.png")


def test_beside_a_baseline_the_worse_case_is_marked_with_both_outputs(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
    tmp_path: Path,
) -> None:
    baseline = passing_eval(store, ago_s=600)
    current = worse_eval(store, ago_s=60, baseline=baseline)  # as `eval --baseline` ran it
    log_in(browser, api, scope="read", path=f"/evals/{current}")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the eval page")
    from selenium.webdriver.support.ui import Select

    link = browser.find_element("id", "run-baseline")
    assert link.text == baseline and link.get_attribute("href").endswith(f"?baseline={baseline}")
    assert browser.find_element("id", "comparison").get_attribute("hidden") is not None
    choice = Select(browser.find_element("id", "baseline"))
    assert [o.get_attribute("value") for o in choice.options] == ["", baseline]
    choice.select_by_value(baseline)  # the page reloads beside it
    wait_until(lambda: f"baseline={baseline}" in browser.current_url, timeout=10, what="chosen")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the comparison")

    verdict = browser.find_element("id", "verdict")
    assert "regressed" in verdict.get_attribute("class").split()
    assert "contains:Paris" in verdict.text and "france" in verdict.text
    regressed = browser.find_elements("css selector", "#compare-scorers tr.regressed")
    assert [row.get_attribute("data-scorer") for row in regressed] == ["contains:Paris"]
    france = browser.find_element("css selector", "details.case-compare[data-case='france']")
    assert "worse" in france.get_attribute("class").split()
    assert france.get_attribute("open") is not None  # opened: something got worse there
    baseline_side, current_side = france.find_elements("css selector", "pre.output")
    assert (baseline_side.text, current_side.text) == ("Paris.", HOSTILE_OUTPUT)
    japan = browser.find_element("css selector", "details.case-compare[data-case='japan']")
    assert "worse" not in japan.get_attribute("class").split() and "unchanged" in japan.text
    assert {"fail", "worse"} <= cell_classes(browser, "france", "contains:Paris")
    assert "worse" not in cell_classes(browser, "japan", "contains:Paris")
    assert body_data(browser, "pwned") is None and flash_text(browser) == ""
    save_screenshot(browser, tmp_path, "dashboard-eval.png")
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []  # no script error, nothing the CSP refused


def test_an_unknown_eval_or_baseline_says_so_in_one_line(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
) -> None:
    eval_id = passing_eval(store)
    log_in(browser, api, scope="read", path="/evals/ev_00000000000000000000")
    wait_until(lambda: "no eval" in flash_text(browser), timeout=15, what="the 404 shown")
    open_page(browser, api, f"/evals/{eval_id}?baseline=ev_00000000000000000001")
    assert "no eval 'ev_00000000000000000001'" in flash_text(browser)
    assert {"score", "pass"} <= cell_classes(browser, "france", "contains:Paris")  # still


def test_a_running_eval_fills_in_without_a_reload_keeping_open_outputs(
    browser: Any,  # noqa: F811
    api: ApiServer,
    store: EvalStore,
) -> None:
    france = case_run("france", "Paris.", [graded("contains:Paris", 1.0, True)])
    eval_id = saved_eval(store, [france], status="running")
    log_in(browser, api, scope="read", path=f"/evals/{eval_id}")
    wait_until(lambda: body_data(browser, "loaded"), timeout=15, what="the eval page")
    assert {"score", "none"} <= cell_classes(browser, "japan", "contains:Paris")
    browser.find_element("css selector", "tr[data-case='france'] details summary").click()
    browser.execute_script("window.stillTheSamePage = true")

    japan = case_run("japan", "Tokyo", [graded("contains:Paris", 0.0, False)])
    store.add_result(eval_id, japan)
    store.save(store.record(eval_id).model_copy(update={"status": "finished"}))
    wait_until(lambda: body_data(browser, "evalStatus") == "finished", timeout=15, what="re-read")
    assert {"score", "fail"} <= cell_classes(browser, "japan", "contains:Paris")
    assert browser.execute_script("return window.stillTheSamePage") is True  # no reload
    opened = browser.find_element("css selector", "tr[data-case='france'] details")
    assert opened.get_attribute("open") is not None  # still open after the re-read
