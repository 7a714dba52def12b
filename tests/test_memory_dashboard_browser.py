"""The dashboard's memory view in a real chromium (Debian's, tests/support/browser.py),
after a real run on a real worker whose fake model read and wrote its memory: each command
of the node (namespace, command, path, the first line of its answer), the writes marked,
secrets masked, and what the model wrote shown as text, never as HTML."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright import PlanBuilder, RunStatus
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer
from tests.support.browser import (  # noqa: F401 (browser, chromium: fixtures)
    browser,
    chromium,
    find_soon,
    log_in,
    open_run,
)
from tests.support.functions import ARCHIVIST
from tests.support.llm_script import call, text, turn
from tests.support.settings import TEST_API_KEY

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes

INJECTED = "/memories/<img src=x onerror=window.pwned=1>.md"


def memory_rows(driver: Any) -> list[dict[str, str]]:
    rows = driver.execute_script(
        "return [...document.querySelectorAll('#panel .node-memory tr.memory-command')]"
        ".map((row) => ({cells: [...row.cells].map((c) => c.textContent),"
        " written: row.dataset.written, status: row.className}));"
    )
    return [
        {
            "namespace": row["cells"][0],
            "command": row["cells"][1],
            "path": row["cells"][2],
            "result": row["cells"][3],
            "written": row["written"],
            "error": "memory-error" in row["status"],
        }
        for row in rows
    ]


def test_the_node_panel_shows_what_the_agent_read_and_wrote_in_memory(
    browser: Any,  # noqa: F811
    api: ApiServer,
    worker: Any,
    fake_llm: FakeAnthropicServer,
) -> None:
    from selenium.webdriver.common.by import By

    fake_llm.add(
        turn(ARCHIVIST, 1, call("memory", command="view", path="/memories")),
        turn(
            ARCHIVIST,
            3,
            call("memory", command="create", path=INJECTED, file_text="<b>bold</b>\n"),
        ),
        turn(
            ARCHIVIST,
            5,
            call(
                "memory",
                command="create",
                path=f"/memories/key-{TEST_API_KEY}.md",
                file_text=f"the key is {TEST_API_KEY}\n",
            ),
        ),
        turn(ARCHIVIST, 7, call("memory", command="view", path="/memories/missing.md")),
        turn(ARCHIVIST, 9, text("noted")),
    )
    plan = PlanBuilder("remembers")
    plan.agent("keep", "archivist", "Keep the notes.")
    run = api.client.submit(plan.build())
    assert run.wait(timeout=60).status == RunStatus.SUCCEEDED

    log_in(browser, api)
    open_run(browser, api, run.run_id)
    browser.find_element(By.CSS_SELECTOR, "[data-node='keep']").click()
    find_soon(browser, "#panel .node-memory[data-loaded='yes']", timeout=20)
    rows = memory_rows(browser)
    namespace = f"run:{run.run_id}"
    assert [(r["namespace"], r["command"], r["written"]) for r in rows] == [
        (namespace, "view", "no"),
        (namespace, "create", "yes"),
        (namespace, "create", "yes"),
        (namespace, "view", "no"),
    ]
    listing, injected, secret, missing = rows
    assert listing["path"] == "/memories" and "/memories" in listing["result"]
    assert injected["path"] == INJECTED  # the model's text, shown as text
    assert injected["result"] == f"File created successfully at: {INJECTED}"
    assert secret["path"] == "/memories/key-***.md" and "***" in secret["result"]
    assert missing["path"] == "/memories/missing.md" and missing["result"]

    panel_html = browser.execute_script("return document.getElementById('panel').innerHTML;")
    assert TEST_API_KEY not in panel_html
    assert not browser.find_elements(By.CSS_SELECTOR, "#panel img")
    tags = browser.execute_script(
        "return [...new Set([...document.querySelectorAll('#panel .node-memory *')]"
        ".map((e) => e.tagName))].sort();"
    )
    assert tags == ["TABLE", "TBODY", "TD", "TH", "THEAD", "TR"]
    assert browser.execute_script("return window.pwned === undefined;")
