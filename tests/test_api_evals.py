"""The evals over real HTTP: list, one eval's report, an eval beside its baseline.

Evals are written through ``EvalStore`` as the runner leaves them (tests/support/evals.py);
the server reads them from the session's Valkey.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from dagwright.evals.reports import report_json
from dagwright.evals.results import EvalReport
from dagwright.evals.runner import eval_store
from tests.support.api_server import ApiServer
from tests.support.evals import (
    HOSTILE_OUTPUT,
    case_run,
    graded,
    passing_eval,
    saved_eval,
    worse_eval,
)


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def store(api: ApiServer) -> Any:
    return eval_store(api.client)


def test_evals_are_listed_newest_first_with_their_pass_rate_and_cost(
    api: ApiServer, store: Any
) -> None:
    older = passing_eval(store, ago_s=300)
    newer = worse_eval(store, ago_s=60)
    other = passing_eval(store, suite="other-suite", ago_s=30)
    with api.http("read") as http:
        listed = http.get("/api/v1/evals").json()
        assert [row["id"] for row in listed] == [other, newer, older]
        of_suite = http.get("/api/v1/evals", params={"suite": "capitals", "limit": 1}).json()
        assert [row["id"] for row in of_suite] == [newer]
        problem(http.get("/api/v1/evals", params={"limit": 101}), 422)
        problem(http.get("/api/v1/evals", params={"suite": "Not A Suite!"}), 422)
    row = listed[1]
    assert row["suite"] == "capitals" and row["status"] == "finished"
    assert row["cases"] == ["france", "japan"] and row["scorers"]["japan"] == [
        "contains:Paris",
        "brief",
    ]
    assert (row["repeat"], row["runs"], row["runs_passed"]) == (1, 2, 1)
    assert "suite_data" not in row and "plan_data" not in row  # as `evals list --json`
    assert (row["scores"], row["scores_passed"], row["pass_rate"]) == (4, 3, 0.75)
    assert row["cost_usd"] == pytest.approx(0.02) and row["duration_s"] == 12.0
    assert "results" not in row and "output" not in str(row)


def test_one_eval_is_its_record_results_and_statistics_over_repeats(
    api: ApiServer, store: Any
) -> None:
    eval_id = saved_eval(
        store,
        [
            case_run(
                "france",
                "Paris",
                [graded("contains:Paris", 1.0, True), graded("brief", 0.75, True, cached=False)],
            ),
            case_run(
                "france",
                "Lyon",
                [graded("contains:Paris", 0.0, False), graded("brief", 0.25, False, cached=True)],
                repeat=1,
            ),
            case_run(
                "japan",
                "Tokyo",
                [graded("contains:Paris", 0.0, False), graded("brief", None, False, cached=False)],
            ),
        ],
        repeat=2,
    )
    with api.http("read") as http:
        shown = http.get(f"/api/v1/evals/{eval_id}").json()
    assert shown == report_json(store.report(eval_id))  # as `dagwright evals show --json`
    assert EvalReport.model_validate(shown) == store.report(eval_id)  # a --baseline file
    assert shown["record"]["id"] == eval_id and shown["record"]["repeat"] == 2
    assert [(r["case"], r["repeat"]) for r in shown["results"]] == [
        ("france", 0),
        ("france", 1),
        ("japan", 0),
    ]
    stats = {s["scorer"]: s for s in shown["stats"]}
    assert stats["contains:Paris"] == {
        "scorer": "contains:Paris",
        "runs": 3,
        "passed": 1,
        "pass_rate": pytest.approx(1 / 3),
        "mean": pytest.approx(1 / 3),
        "stdev": pytest.approx(0.57735, abs=1e-4),
    }
    assert stats["brief"]["mean"] == 0.5 and stats["brief"]["runs"] == 3  # None: not averaged
    france = {s["scorer"]: s for s in shown["case_stats"]["france"]}
    assert france["brief"]["mean"] == 0.5 and france["brief"]["passed"] == 1
    assert france["brief"]["stdev"] == pytest.approx(0.353553, abs=1e-5)
    assert shown["case_stats"]["japan"][0]["stdev"] is None  # one run: no spread
    assert shown["judge"] == {"asked": 2, "cached": 1, "cost_usd": pytest.approx(0.002)}
    assert shown["cost_usd"] == pytest.approx(0.03)


def test_an_eval_beside_its_baseline_names_the_worse_case_with_both_outputs(
    api: ApiServer, store: Any
) -> None:
    baseline = passing_eval(store, ago_s=300)
    current = worse_eval(store, ago_s=60)
    with api.http("read") as http:
        found = http.get(f"/api/v1/evals/{current}/compare", params={"baseline": baseline})
        loose = http.get(
            f"/api/v1/evals/{current}/compare", params={"baseline": baseline, "tolerance": 0.5}
        ).json()
    assert found.status_code == 200, found.text
    body = found.json()
    assert (body["eval_id"], body["baseline_id"]) == (current, baseline)
    assert body["regressions"] == ["contains:Paris"] and body["regressed"]
    assert body["worse_cases"] == ["france"]
    contains = body["scorers"][0]
    assert (contains["baseline_pass_rate"], contains["pass_rate"]) == (1.0, 0.5)
    assert (contains["delta_mean"], contains["regressed"]) == (-0.5, True)
    france = body["cases"][0]
    assert france["worse"] == ["contains:Paris"]
    assert (france["baseline_output"], france["output"]) == ("Paris.", HOSTILE_OUTPUT)
    assert loose["regressions"] == []  # a fall of 0.5 is within a tolerance of 0.5


def test_an_unknown_or_implausible_eval_is_a_404_problem(api: ApiServer, store: Any) -> None:
    known = passing_eval(store)
    with api.http("read") as http:
        missing = problem(http.get("/api/v1/evals/ev_00000000000000000000"), 404)
        assert missing["error"] == "UnknownEvalError" and "evals list" in missing["detail"]
        problem(http.get("/api/v1/evals/runs:1:state"), 404)  # never read as a key
        problem(http.get("/api/v1/evals/ev_" + "x" * 5000), 404)
        problem(http.get(f"/api/v1/evals/{known}/compare", params={"baseline": "ev_nope"}), 404)
        problem(http.get("/api/v1/evals/ev_nope/compare", params={"baseline": known}), 404)
        problem(http.get(f"/api/v1/evals/{known}/compare"), 422)  # no baseline named


def test_the_eval_routes_need_a_token_and_are_in_the_openapi_document(
    api: ApiServer, store: Any
) -> None:
    eval_id = passing_eval(store)
    with api.http(None) as anonymous:
        for path in ("/api/v1/evals", f"/api/v1/evals/{eval_id}"):
            problem(anonymous.get(path), 401)
        compared = anonymous.get(f"/api/v1/evals/{eval_id}/compare", params={"baseline": eval_id})
        problem(compared, 401)
    with api.http("read") as http:
        paths = set(http.get("/api/v1/openapi.json").json()["paths"])
    assert {
        "/api/v1/evals",
        "/api/v1/evals/{eval_id}",
        "/api/v1/evals/{eval_id}/compare",
    } <= paths


def test_a_running_evals_row_follows_its_results_and_a_resumed_one_ends_anew(
    api: ApiServer, store: Any
) -> None:
    """Rows of ended evals are kept by the server (their results no longer change);
    a running eval's row, and a resumed eval's once it ends again, are read afresh."""
    eval_id = saved_eval(store, [], status="running")

    def row() -> dict[str, Any]:
        with api.http("read") as http:
            [found] = http.get("/api/v1/evals").json()
            assert found["id"] == eval_id
            return dict(found)

    assert (row()["runs"], row()["status"]) == (0, "running")
    store.add_result(eval_id, case_run("france", "Paris", [graded("contains:Paris", 1.0, True)]))
    assert row()["runs"] == 1
    record = store.record(eval_id)
    ended = record.model_copy(update={"status": "interrupted", "finished_at": record.started_at})
    store.save(ended)
    assert (row()["runs"], row()["status"]) == (1, "interrupted")
    assert row()["pass_rate"] == 1.0  # kept, read again

    store.save(ended.model_copy(update={"status": "running", "finished_at": None}))  # resumed
    store.add_result(eval_id, case_run("japan", "Tokyo", [graded("contains:Paris", 0.0, False)]))
    assert (row()["runs"], row()["status"]) == (2, "running")
    later = record.started_at + timedelta(seconds=5)
    store.save(ended.model_copy(update={"status": "finished", "finished_at": later}))
    finished = row()
    assert (finished["runs"], finished["status"], finished["pass_rate"]) == (2, "finished", 0.5)


def test_a_case_run_that_failed_ungraded_is_not_counted_as_passed(
    api: ApiServer, store: Any
) -> None:
    from dagwright.evals.results import CaseResult

    france = case_run("france", "Paris", [graded("contains:Paris", 1.0, True)])
    japan = CaseResult(case="japan", repeat=0, status="error", error="the plan was refused")
    eval_id = saved_eval(store, [france, japan])
    with api.http("read") as http:
        [row] = http.get("/api/v1/evals").json()
        shown = http.get(f"/api/v1/evals/{eval_id}").json()
    assert (row["runs"], row["runs_passed"], row["pass_rate"]) == (2, 1, 1.0)
    assert shown["results"][1]["error"] == "the plan was refused"


def test_an_eval_that_expires_while_the_list_is_read_is_left_out(
    api: ApiServer, store: Any
) -> None:
    from dagwright.evals.store import EvalStore
    from dagwright.server.routes.evals import EndedEvalRows, listed

    kept, expiring = passing_eval(store, ago_s=120), passing_eval(store, ago_s=60)

    class ExpiringAsListed(EvalStore):
        """Its newest record's retention ends between the index and the record read."""

        def list(self, **options: Any) -> list[Any]:
            records = super().list(**options)
            self.client.delete(self.keys.eval_record(expiring))
            return records

    racing = ExpiringAsListed(store.client, store.keys, store.retention_s)
    assert [row["id"] for row in listed(racing, EndedEvalRows(), None, 20)] == [kept]
