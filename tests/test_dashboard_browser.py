"""The dashboard in a real chromium, against a real server, Valkey and Celery worker.

Each test drives Debian's chromium (tests/support/browser.py) through the pages as an
operator would: log in with a token, watch a run's nodes change colour over the event
stream without a reload, approve a waiting node from its panel, replay a dead letter. The
run page's screenshot is saved (and copied to ``DAGWRIGHT_SCREENSHOT_DIR`` when set: that
is how docs/images/dashboard-run.png is made).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright import Client, Plan, PlanBuilder, RunStatus, Settings
from dagwright.server.local_access import login_url, read_token
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer, running_server
from tests.support.browser import (  # noqa: F401 (browser, chromium: fixtures)
    alert_of,
    body_data,
    browser,
    chromium,
    drawn_nodes,
    find_soon,
    flash_text,
    listed_runs,
    log_in,
    node_fill,
    node_status,
    open_run,
    save_screenshot,
    wait_for_node,
)
from tests.support.functions import fixed_key
from tests.support.llm_script import agent_node, answers, planned
from tests.support.waiting import wait_until

pytestmark = pytest.mark.subprocess  # chromedriver and chromium are child processes

SUCCEEDED_FILL = "rgb(104, 211, 145)"  # --st-succeeded of dashboard.css
WAITING_FILL = "rgb(246, 224, 94)"  # --st-waiting_approval


@pytest.fixture
def server(api: ApiServer, worker: Any) -> ApiServer:
    """The session's server over the in-process worker's databases (emptied for this test)."""
    return api


def gated_release() -> Plan:
    """collect -> four scores -> summary -> deploy (needs approval) -> announce."""
    plan = PlanBuilder("Release v1 once the scores are in")
    collect = plan.function("collect", "concat", params={"parts": ["inputs"]})
    scores = [
        plan.function(f"score-{i}", "concat", params={"parts": [f"s{i}"]}, depends_on=[collect])
        for i in range(1, 5)
    ]
    summary = plan.function("summary", "concat", depends_on=scores)
    deploy = plan.node(
        "deploy",
        "function",
        function="concat",
        params={"parts": ["release", "v1"]},
        approval="required",
        depends_on=[summary],
    )
    plan.function("announce", "concat", params={"parts": ["shipped:"]}, depends_on=[deploy])
    return plan.build(output="announce")


def waiting_for_approval(client: Client, run_id: str) -> None:
    wait_until(
        lambda: any(a.node == "deploy" for a in client.approvals.list(run_id)),
        timeout=30,
        what="deploy waiting for approval",
    )


def test_logging_in_with_a_token_shows_the_runs(browser: Any, server: ApiServer) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    run = server.client.submit(gated_release())
    browser.get(f"{server.url}/login")
    browser.find_element(By.ID, "token").send_keys("dw_not-a-token")
    browser.find_element(By.ID, "login").click()
    assert "not valid" in find_soon(browser, ".flash-error").text  # once the answer loaded

    log_in(browser, server, scope="read")
    wait_until(lambda: body_data(browser, "loaded"), timeout=10, what="the runs list")
    row = browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{run.run_id}']")
    assert "Release v1 once the scores are in" in row.text
    cookie = browser.get_cookie("dw_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "read" in browser.find_element(By.ID, "who").text
    browser.find_element(By.CSS_SELECTOR, f"tr[data-run='{run.run_id}'] a").click()
    cancel = find_soon(browser, "#cancel:not([hidden])")
    assert not cancel.is_enabled()  # a read-only token changes nothing, so cannot try
    browser.back()

    other = PlanBuilder("Count the words")
    other.function("count", "concat", params={"parts": ["one two"]})
    counted = server.client.submit(other.build())
    counted.wait(timeout=30)
    browser.find_element(By.NAME, "q").send_keys("words")
    wait_until(lambda: listed_runs(browser) == [counted.run_id], timeout=10, what="searched")
    browser.find_element(By.NAME, "q").clear()
    Select(browser.find_element(By.NAME, "status")).select_by_value("running")
    wait_until(lambda: listed_runs(browser) == [run.run_id], timeout=10, what="filtered")

    browser.find_element(By.ID, "logout").click()
    wait_until(lambda: "/login" in browser.current_url, timeout=10, what="logged out")
    assert browser.get_cookie("dw_session") is None


def test_a_visitor_without_a_token_is_refused(browser: Any, server: ApiServer) -> None:  # noqa: F811
    run = server.client.submit(gated_release())
    browser.get(f"{server.url}/runs/{run.run_id}")
    wait_until(lambda: "/login?next=" in browser.current_url, timeout=10, what="redirected")
    assert browser.current_url.endswith(f"/login?next=%2Fruns%2F{run.run_id}")

    with httpx.Client(base_url=server.url, timeout=10) as anonymous:
        assert anonymous.get(f"/api/v1/runs/{run.run_id}").status_code == 401
        page = anonymous.get("/dlq")
        assert page.status_code == 303 and page.headers["location"] == "/login?next=%2Fdlq"
        basic = anonymous.get("/dlq", auth=("", server.token("read")))
        assert basic.status_code == 200
        assert "script-src 'self'" in basic.headers["content-security-policy"]
        assert "unsafe-inline" not in basic.headers["content-security-policy"]


def test_the_one_time_link_of_up_opens_the_dashboard_once(
    browser: Any,  # noqa: F811
    settings: Settings,
    redis_client: Any,
) -> None:
    """The link ``dagwright up`` prints, clicked: the runs, as admin, with no token
    pasted; the same link from the browser's history opens nothing more."""
    with running_server(settings, local_access=True) as server:
        run = server.client.submit(gated_release())
        link = login_url(server.url, str(read_token(settings.process.data_dir, server.port)))
        browser.get(link)
        wait_until(lambda: body_data(browser, "loaded"), timeout=10, what="the runs list")
        assert browser.current_url == f"{server.url}/"
        assert run.run_id in listed_runs(browser)
        assert "admin" in browser.find_element("id", "who").text
        browser.delete_all_cookies()
        browser.get(link)
        assert "used already" in find_soon(browser, ".flash-error").text
        assert browser.get_cookie("dw_session") is None


def test_node_colours_change_live_without_a_reload(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server)
    open_run(browser, server, run.run_id)
    wait_for_node(browser, "deploy", "waiting_approval")
    assert node_fill(browser, "deploy") == WAITING_FILL
    assert node_status(browser, "announce") == "pending"
    browser.execute_script("window.stillTheSamePage = true")

    server.client.approvals.approve(run.run_id, "deploy")  # from elsewhere: the CLI, say
    wait_for_node(browser, "announce", "succeeded")
    wait_until(lambda: node_fill(browser, "deploy") == SUCCEEDED_FILL, timeout=5, what="fill")
    assert browser.execute_script("return window.stillTheSamePage") is True  # no reload
    wait_until(
        lambda: browser.find_element("id", "run-status").text == "succeeded",
        timeout=10,
        what="the run's status updated",
    )


def test_planned_nodes_appear_live_and_the_panel_shows_the_llm_transcript(
    browser: Any,  # noqa: F811
    server: ApiServer,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    fake_llm.add(
        {  # the planner takes its time: the page is open before the plan exists
            **planned(
                agent_node("pros", "researcher", "List the pros of Redis streams."),
                agent_node("cons", "researcher", "List the cons of Redis streams."),
            ),
            "delay_s": 4,
        },
        answers("researcher", "fast, durable", "List the pros"),
        answers("researcher", "memory-bound", "List the cons"),
        answers("writer", "Fast but memory-bound.", "Combine the results"),
    )
    log_in(browser, server)
    run = server.client.submit(goal="Weigh Redis streams for our event bus")
    open_run(browser, server, run.run_id)
    assert drawn_nodes(browser) == {"_plan"}
    browser.execute_script("window.stillTheSamePage = true")
    wait_until(
        lambda: drawn_nodes(browser) == {"_plan", "pros", "cons", "synthesis"},
        timeout=30,
        what="the planned nodes drawn",
    )
    wait_for_node(browser, "synthesis", "succeeded")
    assert browser.execute_script("return window.stillTheSamePage") is True

    browser.find_element("css selector", "[data-node='pros']").click()
    calls = find_soon(browser, "#panel table.calls tbody tr")
    with server.http("read") as http:
        [call] = http.get(f"/api/v1/runs/{run.run_id}/nodes/pros").json()["llm_calls"]
    shown = calls.text.split()
    assert shown[:3] == [call["model"], str(call["input_tokens"]), str(call["output_tokens"])]
    assert shown[4] == f"${call['cost_usd']:.4f}"
    transcript = find_soon(browser, "#panel ol.transcript").text
    assert "List the pros of Redis streams." in transcript and "fast, durable" in transcript
    spans = browser.find_elements("css selector", "#panel ul.timeline li")
    assert any(span.text.startswith("llm.call") for span in spans)
    save_screenshot(browser, tmp_path, "dashboard-node.png")


def test_approving_a_waiting_node_with_edited_args_lets_it_finish(
    browser: Any,  # noqa: F811
    server: ApiServer,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By

    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server, path=f"/runs/{run.run_id}")
    wait_until(lambda: body_data(browser, "graphDrawnMs"), timeout=30, what="the graph drawn")
    browser.find_element(By.CSS_SELECTOR, "[data-node='deploy']").click()
    args = find_soon(browser, "#panel textarea.args")
    wait_until(lambda: '"v1"' in args.get_attribute("value"), timeout=10, what="the args")
    save_screenshot(browser, tmp_path, "dashboard-run.png")

    args.clear()
    args.send_keys('{"params": {"parts": ["release", "v2"]}}')
    browser.find_element(By.CSS_SELECTOR, "#panel button.approve").click()
    wait_for_node(browser, "announce", "succeeded")
    final = run.wait(timeout=30)
    assert final.status == RunStatus.SUCCEEDED
    assert final.nodes["deploy"].output.startswith("release v2 s1")  # the edited args


def test_a_score_posted_through_the_api_shows_on_the_run_page(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    from selenium.webdriver.common.by import By

    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server, path=f"/runs/{run.run_id}")
    wait_until(lambda: body_data(browser, "scoresShown") == "0", timeout=30, what="no scores")
    hostile = '<img src=x onerror="window.pwned = 1">'
    with server.http("operate") as http:
        posted = http.post(
            f"/api/v1/runs/{run.run_id}/scores",
            json={"name": "correctness", "value": 0.8, "comment": hostile},
        )
        assert posted.status_code == 201, posted.text
    server.client.approvals.approve(run.run_id, "deploy")  # the page reads its run again
    wait_until(lambda: body_data(browser, "scoresShown") == "1", timeout=30, what="the score")
    # Read in one step: the table is drawn anew each time the page reads the run again.
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#scores tr[data-score] td')]"
        ".map((cell) => cell.innerText);"
    )
    assert cells[:3] == ["correctness", "0.8", hostile]  # the comment shown as text
    assert cells[3] == "test-operate · api"
    assert browser.find_elements(By.CSS_SELECTOR, "#scores img") == []
    assert browser.execute_script("return window.pwned || null") is None

    form = browser.find_element(By.ID, "score-form")  # and one given on the page
    form.find_element(By.NAME, "name").send_keys("user.thumbs")
    form.find_element(By.NAME, "value").send_keys("true")
    browser.find_element(By.ID, "add-score").click()
    wait_until(lambda: body_data(browser, "scoresShown") == "2", timeout=15, what="its score")
    [_, thumbs] = server.client.scores(run.run_id)
    assert (thumbs.name, thumbs.value, thumbs.source) == ("user.thumbs", 1.0, "api")


def test_rejecting_a_waiting_node_fails_it_with_the_reason(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server, path=f"/runs/{run.run_id}")
    wait_until(lambda: body_data(browser, "graphDrawnMs"), timeout=30, what="the graph drawn")
    browser.find_element("css selector", "[data-node='deploy']").click()
    find_soon(browser, "#panel input.reason").send_keys("not on a Friday")
    browser.find_element("css selector", "#panel button.reject").click()
    wait_for_node(browser, "deploy", "failed")
    wait_for_node(browser, "announce", "blocked")
    error = find_soon(browser, "#panel pre.error").text  # the open panel follows its node
    assert error.startswith("ApprovalRejectedError:") and "not on a Friday" in error
    assert run.wait(timeout=30).status == RunStatus.FAILED


def test_cancelling_a_run_from_its_page(browser: Any, server: ApiServer) -> None:  # noqa: F811
    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server, path=f"/runs/{run.run_id}")
    find_soon(browser, "#cancel:not([hidden])").click()
    wait_until(lambda: alert_of(browser), timeout=5, what="the confirmation").accept()
    wait_until(
        lambda: browser.find_element("id", "run-status").text == "cancelled",
        timeout=10,
        what="the run shown cancelled",
    )
    assert run.status().status == RunStatus.CANCELLED
    wait_for_node(browser, "announce", "cancelled")


def test_replaying_a_dead_letter_from_the_dlq_page(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    from selenium.webdriver.common.by import By

    plan = PlanBuilder("A step that fails until its cause is fixed")
    fix = plan.function("fix", "broken_until_fixed")
    plan.function("after", "concat", params={"parts": ["after"]}, depends_on=[fix])
    run = server.client.submit(plan.build(output="after"))
    assert run.wait(timeout=30).status == RunStatus.FAILED
    server.client.runtime.client.set(fixed_key(run.run_id), 1)  # the cause, fixed

    log_in(browser, server, path=f"/runs/{run.run_id}")
    browser.find_element(By.LINK_TEXT, "Dead letters of this run").click()
    wait_until(lambda: body_data(browser, "loaded"), timeout=10, what="the dead letters")
    assert run.run_id in browser.find_element(By.ID, "filter-note").text
    [letter] = server.client.dlq.list()
    row = browser.find_element(By.CSS_SELECTOR, f"tr[data-letter='{letter.id}']")
    assert "on purpose" in row.text
    row.find_element(By.CSS_SELECTOR, "button.replay").click()
    flash = find_soon(browser, "#flash .flash")
    assert flash.text == f"replayed fix of run {run.run_id}"
    wait_until(
        lambda: run.status().status == RunStatus.SUCCEEDED, timeout=30, what="the run re-opened"
    )
    assert run.status().nodes["after"].output == "after fixed"


@pytest.mark.slow
def test_a_thousand_node_run_page_draws(
    browser: Any,  # noqa: F811
    no_worker_settings: Settings,
) -> None:
    """Not a timing assertion (benchmarks/dashboard_load.py measures): the page draws,
    folded into a few dozen boxes."""
    from selenium.webdriver.common.by import By

    with running_server(no_worker_settings) as quiet:
        run = quiet.client.submit(sharded_map(nodes=1000, shards=10))
        log_in(browser, quiet, path=f"/runs/{run.run_id}")
        wait_until(lambda: body_data(browser, "graphDrawnMs"), timeout=120, what="drawn")
        note = browser.find_element(By.ID, "graph-note").text
        assert note.startswith("1000 nodes drawn as")
        boxes = browser.find_elements(By.CSS_SELECTOR, "#graph .item")
        assert 10 <= len(boxes) <= 60
        assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .item.group")) == 10

        browser.find_element(By.CSS_SELECTOR, "#graph .item.group").click()
        members = find_soon(browser, "#panel ul.members")
        assert len(members.find_elements(By.TAG_NAME, "li")) in (98, 99)
        browser.find_element(By.CSS_SELECTOR, "#panel button.expand").click()
        wait_until(
            lambda: len(browser.find_elements(By.CSS_SELECTOR, "#graph .item.group")) == 9,
            timeout=30,
            what="the group expanded",
        )
        assert len(browser.find_elements(By.CSS_SELECTOR, "#graph .item")) > 100


def test_a_maps_children_show_folded_before_their_map(
    browser: Any,  # noqa: F811
    server: ApiServer,
) -> None:
    from selenium.webdriver.common.by import By

    plan = PlanBuilder("one researcher per company")
    find = plan.function("find", "companies", params={"count": 4})
    plan.function("research", "concat", depends_on=[find], map={"over": find, "path": "companies"})
    run = server.client.submit(plan.build())
    log_in(browser, server)
    open_run(browser, server, run.run_id)
    wait_for_node(browser, "research", "succeeded")
    group = find_soon(browser, "#graph .item.group[data-item='group:map:research']")
    assert group.find_element(By.CSS_SELECTOR, ".name").text == "research[0..3] \u00d74"
    assert group.get_attribute("data-status") == "succeeded"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-node='research[0]']")


def sharded_map(nodes: int, shards: int) -> Plan:
    """split -> shards x (map nodes -> a reduce) -> report, ``nodes`` in all."""
    plan = PlanBuilder("A sharded map over a thousand nodes")
    split = plan.function("split", "concat", params={"parts": ["go"]})
    per_shard, larger = divmod(nodes - 2, shards)  # each shard: its maps and its reduce
    reduces = []
    for shard in range(shards):
        width = per_shard - 1 + (shard < larger)
        maps = [
            plan.function(f"map-{shard}-{i}", "concat", depends_on=[split]) for i in range(width)
        ]
        reduces.append(plan.function(f"reduce-{shard}", "concat", depends_on=maps))
    plan.function("report", "concat", depends_on=reduces)
    return plan.build(output="report")


def test_pausing_resuming_and_firing_a_schedule(browser: Any, server: ApiServer) -> None:  # noqa: F811
    plan = PlanBuilder("Nightly digest")
    plan.function("digest", "concat", params={"parts": ["digest"]})
    server.client.schedules.add("nightly", cron="0 3 * * *", plan=plan.build())
    log_in(browser, server, path="/schedules")
    row = "tr[data-schedule='nightly']"

    find_soon(browser, f"{row} button.pause").click()
    find_soon(browser, f"{row} button.resume")
    assert server.client.schedules.get("nightly").schedule.paused
    find_soon(browser, f"{row} button.resume").click()
    find_soon(browser, f"{row} button.pause")
    assert not server.client.schedules.get("nightly").schedule.paused

    find_soon(browser, f"{row} button.run").click()
    said = wait_until(
        lambda: "(run " in (text := flash_text(browser)) and text,
        timeout=10,
        what="the fired run named",
    )
    run_id = said.split("(run ")[1].rstrip(")")
    assert server.client.status(run_id).goal == "Nightly digest"


def test_eight_tabs_on_a_run_each_load(browser: Any, server: ApiServer) -> None:  # noqa: F811
    """A browser opens six connections to a site at most, and each open event stream holds
    one: run pages in background tabs close theirs, so the seventh tab still loads."""
    run = server.client.submit(gated_release())
    waiting_for_approval(server.client, run.run_id)
    log_in(browser, server)
    first = browser.current_window_handle
    try:
        for tab in range(8):
            if tab:
                browser.switch_to.new_window("tab")
            open_run(browser, server, run.run_id)  # drawn: its run was read after the rest
            assert node_status(browser, "deploy") == "waiting_approval"
    finally:
        for handle in browser.window_handles:
            if handle != first:
                browser.switch_to.window(handle)
                browser.close()
        browser.switch_to.window(first)
