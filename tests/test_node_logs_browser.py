"""The node panel's logs in a real chromium (Debian's, tests/support/browser.py), against
a real server, Valkey and Celery worker: shown while the node runs, followed to its end."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import PlanBuilder
from dagwright.models import RetryPolicy
from tests.support.api_server import ApiServer
from tests.support.browser import (  # noqa: F401 (browser, chromium: fixtures)
    browser,
    chromium,
    log_in,
    node_status,
    open_run,
    wait_for_node,
)
from tests.support.functions import release_key
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes


def panel_lines(driver: Any) -> list[str]:
    return [
        str(text)
        for text in driver.execute_script(
            "return [...document.querySelectorAll('#panel .node-logs .log-line')]"
            ".map((line) => line.textContent);"
        )
    ]


def test_the_node_panel_follows_a_running_nodes_logs(
    browser: Any,  # noqa: F811
    api: ApiServer,
    worker: Any,
) -> None:
    from selenium.webdriver.common.by import By

    plan = PlanBuilder("talk slowly")
    params = {"lines": 3, "held": True, "fail_times": 1}
    plan.function(
        "talk", "chatter", params=params, retry=RetryPolicy(max_attempts=2, backoff_s=0.1)
    )
    run_id = api.client.submit(plan.build()).run_id
    wait_until(lambda: api.client.logs(run_id), timeout=30, what="the node's first line")
    log_in(browser, api)
    open_run(browser, api, run_id)
    browser.find_element(By.CSS_SELECTOR, "[data-node='talk']").click()
    wait_until(
        lambda: any(line.endswith("hello from talk attempt 1") for line in panel_lines(browser)),
        timeout=15,
        what="the running node's first line in its panel",
    )
    assert node_status(browser, "talk") == "running"  # held: shown while it runs
    api.client.runtime.client.set(release_key(run_id), 1)
    wait_for_node(browser, "talk", "succeeded", timeout=60)
    expected = ("#2 out   line 2 of talk", "#1 out   hello from talk attempt 1")
    expected += ("#2 WARNING logged by talk",)

    def shows_both_attempts() -> bool:  # in one snapshot: the panel redraws as lines come
        shown = panel_lines(browser)
        return all(any(part in line for line in shown) for part in expected)

    wait_until(shows_both_attempts, timeout=15, what=f"{expected} in {panel_lines(browser)}")
