"""Runs over real HTTP: submit (idempotent), read, list, result, cancel, trace, node
detail, and errors as problem+json with the CLI's lines."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dagwright import Client, PlanBuilder
from dagwright.errors import UnknownRunError
from dagwright.json_views import run_json
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer, free_port, running_server
from tests.support.llm_script import RESEARCHER, call, text, turn
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

DIAMOND: dict[str, Any] = {
    "goal": "a diamond",
    "nodes": [
        {"id": "a", "type": "function", "function": "concat", "params": {"parts": ["a"]}},
        {"id": "b", "type": "function", "function": "concat", "depends_on": ["a"]},
        {"id": "c", "type": "function", "function": "concat", "depends_on": ["a"]},
        {"id": "d", "type": "function", "function": "concat", "depends_on": ["b", "c"]},
    ],
}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail", "error"} <= set(body)
    assert "Traceback" not in response.text
    return body


def finished(http: httpx.Client, run_id: str) -> dict[str, Any]:
    def final() -> dict[str, Any] | None:
        run: dict[str, Any] = http.get(f"/api/v1/runs/{run_id}").json()
        return run if run["status"] in ("succeeded", "failed", "cancelled") else None

    found: dict[str, Any] = wait_until(final, timeout=30, what=f"run {run_id} to finish")
    return found


def test_a_plan_submitted_over_http_runs_and_reads_as_status_json(api: ApiServer) -> None:
    with api.http("operate") as http:
        submitted = http.post("/api/v1/runs", json={"plan": DIAMOND})
        assert submitted.status_code == 201, submitted.text
        run_id = submitted.json()["run_id"]
        assert submitted.headers["location"] == f"/api/v1/runs/{run_id}"
        run = finished(http, run_id)
        assert run == run_json(api.client.status(run_id))  # one shape for CLI and API
        assert run["status"] == "succeeded"
        assert run["nodes"]["d"]["depends_on"] == ["b", "c"]
        assert http.get(f"/api/v1/runs/{run_id}/result").json() == {
            "run_id": run_id,
            "result": run["result"],
        }
        trace = http.get(f"/api/v1/runs/{run_id}/trace").json()
        assert trace["run_id"] == run_id and trace["spans"][0]["name"] == "run"


def test_the_same_idempotency_key_gives_201_then_200_and_the_same_run(api: ApiServer) -> None:
    with api.http("operate") as http:
        first = http.post("/api/v1/runs", json={"plan": DIAMOND}, headers={"Idempotency-Key": "k1"})
        again = http.post("/api/v1/runs", json={"plan": DIAMOND, "idempotency_key": "k1"})
        assert (first.status_code, again.status_code) == (201, 200)
        assert first.json()["run_id"] == again.json()["run_id"]
        other = {**DIAMOND, "goal": "another"}
        conflict = http.post(
            "/api/v1/runs", json={"plan": other}, headers={"Idempotency-Key": "k1"}
        )
    body = problem(conflict, 409)
    assert body["error"] == "IdempotencyConflictError"
    assert first.json()["run_id"] in body["detail"]


def test_an_unknown_run_is_a_404_with_the_clis_line(api: ApiServer) -> None:
    with api.http("read") as http:
        for path in ("/api/v1/runs/nope", "/api/v1/runs/nope/events", "/api/v1/runs/nope/nodes/a"):
            body = problem(http.get(path), 404)
            assert body["detail"] == str(UnknownRunError("nope"))
            assert body["error"] == "UnknownRunError"


def test_a_bad_plan_is_a_422_listing_every_problem(api: ApiServer) -> None:
    bad = {
        "nodes": [
            {"id": "a", "type": "function", "function": "concat", "depends_on": ["ghost"]},
            {"id": "a", "type": "no-such-type"},
        ]
    }
    with api.http("operate") as http:
        body = problem(http.post("/api/v1/runs", json={"plan": bad}), 422)
        assert body["error"] == "PlanError"
        assert len(body["problems"]) >= 2
        assert body["detail"].startswith(body["problems"][0])
        neither = problem(http.post("/api/v1/runs", json={}), 422)
        assert neither["detail"] == "give either a plan or a goal"
        typo = problem(http.post("/api/v1/runs", json={"plan": DIAMOND, "max_nodez": 3}), 422)
        assert typo["error"] == "RequestValidationError" and "max_nodez" in typo["detail"]


def test_runs_are_listed_newest_first_filtered_and_paged(api: ApiServer) -> None:
    client: Client = api.client
    ids = [client.submit({**DIAMOND, "goal": f"job {n}"}).run_id for n in range(5)]
    for run_id in ids:
        client.wait(run_id, timeout=30)
    with api.http("read") as http:
        page = http.get("/api/v1/runs", params={"limit": 2}).json()
        assert [run["run_id"] for run in page["runs"]] == ids[::-1][:2]
        assert "nodes" not in page["runs"][0]
        rest = http.get("/api/v1/runs", params={"limit": 10, "cursor": page["next_cursor"]})
        assert [run["run_id"] for run in rest.json()["runs"]] == ids[::-1][2:]
        assert rest.json()["next_cursor"] is None
        found = http.get("/api/v1/runs", params={"q": "JOB 3", "status": "succeeded"}).json()
        assert [run["run_id"] for run in found["runs"]] == [ids[3]]
        assert http.get("/api/v1/runs", params={"status": "failed"}).json()["runs"] == []
        bad = problem(http.get("/api/v1/runs", params={"status": "done"}), 422)
        assert "query.status: Input should be 'planning'" in bad["detail"]
        for cursor in ("nan", "inf:x", "-inf"):  # float() takes them; no page starts there
            odd = problem(http.get("/api/v1/runs", params={"cursor": cursor}), 422)
            assert "query.cursor: String should match pattern" in odd["detail"]


def test_a_run_is_cancelled_over_http(api: ApiServer) -> None:
    slow = {
        "nodes": [{"id": "s", "type": "function", "function": "count", "params": {"seconds": 5}}]
    }
    with api.http("operate") as http:
        run_id = http.post("/api/v1/runs", json={"plan": slow}).json()["run_id"]
        cancelled = http.post(f"/api/v1/runs/{run_id}/cancel", json={"reason": "enough"})
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled" and cancelled.json()["reason"] == "enough"
        result = problem(http.get(f"/api/v1/runs/{run_id}/result"), 409)
        assert result["error"] == "RunCancelledError" and "enough" in result["detail"]


def test_node_detail_has_the_spec_inputs_transcript_and_llm_calls(
    api: ApiServer, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        turn(RESEARCHER, 1, text("Reading."), call("read_input", node="brief"), tokens=(300, 40)),
        turn(RESEARCHER, 3, text("Streams are logs."), tokens=(500, 60)),
    )
    plan = PlanBuilder("Research streams")
    brief = plan.function("brief", "concat", params={"parts": ["Topic: streams"]})
    plan.agent("research", "researcher", "Collect facts.", depends_on=[brief])
    run_id = api.client.submit(plan.build()).run_id
    with api.http("read") as http:
        assert finished(http, run_id)["status"] == "succeeded"
        node = http.get(f"/api/v1/runs/{run_id}/nodes/research").json()
        missing = problem(http.get(f"/api/v1/runs/{run_id}/nodes/ghost"), 404)
    assert missing["error"] == "UnknownNodeError"
    assert node["node_id"] == "research" and node["status"] == "succeeded"
    assert node["depends_on"] == ["brief"]
    assert node["spec"]["instruction"] == "Collect facts."
    assert node["inputs"] == {"brief": api.client.status(run_id).nodes["brief"].output}
    roles = [message["role"] for message in node["transcript"]]
    assert roles[:3] == ["user", "assistant", "user"]
    assert "Streams are logs." in str(node["transcript"][-1])
    assert [(c["input_tokens"], c["output_tokens"]) for c in node["llm_calls"]] == [
        (300, 40),
        (500, 60),
    ]
    assert all(c["model"] and c["cost_usd"] > 0 and c["started_at"] for c in node["llm_calls"])
    assert [c["cache_read_input_tokens"] for c in node["llm_calls"]] == [0, 0]
    assert {span["name"] for span in node["spans"]} >= {"node.attempt", "llm.call"}


def test_an_unreachable_redis_is_a_503_naming_neither_its_address_nor_its_password(
    settings: Settings,
) -> None:
    dead = settings.model_copy(update={"redis_url": f"redis://:hunter2@127.0.0.1:{free_port()}/0"})
    with running_server(dead) as server, server.http(None) as http:
        basic = problem(http.get("/api/v1/runs/r1", auth=("", "x")), 503)
        with_token = problem(http.get("/api/v1/whoami", headers={"Authorization": "Bearer x"}), 503)
    for body in (basic, with_token):
        assert body["error"] == "BrokerUnavailableError"
        assert body["detail"].startswith("the server cannot reach its Redis store")
        assert "hunter2" not in str(body) and "127.0.0.1" not in str(body)


def test_a_malformed_last_event_id_is_a_422(api: ApiServer) -> None:
    run_id = api.client.submit(DIAMOND).run_id
    with api.http("read") as http:
        bad = http.get(f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": "zzz"})
    assert problem(bad, 422)["error"] == "RequestValidationError"


def test_a_plan_with_inputs_runs_with_them_and_a_bad_input_is_a_422(api: ApiServer) -> None:
    plan = {
        "inputs": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "greeting": {"default": "hello"}},
            "required": ["name"],
        },
        "nodes": [
            {
                "id": "greet",
                "type": "function",
                "function": "concat",
                "params": {"parts": ["{{ inputs.greeting }}", "{{ inputs.name }}"]},
            }
        ],
    }
    with api.http("operate") as http:
        submitted = http.post("/api/v1/runs", json={"plan": plan, "inputs": {"name": "Ada"}})
        assert submitted.status_code == 201, submitted.text
        run = finished(http, submitted.json()["run_id"])
        assert run["inputs"] == {"name": "Ada", "greeting": "hello"}
        assert run["nodes"]["greet"]["output"] == "hello Ada"
        refused = problem(http.post("/api/v1/runs", json={"plan": plan, "inputs": {}}), 422)
        assert refused["detail"].startswith("input 'name' is required")
