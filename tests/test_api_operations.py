"""Approvals, the DLQ, schedules, worker types and the OpenAPI document over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dagwright import Client
from dagwright.json_views import approval_json
from dagwright.server.resources import ApprovalRequest, DeadLetter, DeadLetterSummary
from tests.support.api_server import ApiServer
from tests.support.functions import fixed_key
from tests.support.waiting import wait_until

pytestmark = pytest.mark.usefixtures("worker")

GATED: dict[str, Any] = {
    "nodes": [
        {
            "id": "deploy",
            "type": "function",
            "function": "concat",
            "params": {"parts": ["release", "v1"]},
            "approval": "required",
        },
        {"id": "announce", "type": "function", "function": "concat", "depends_on": ["deploy"]},
    ]
}
BROKEN_UNTIL_FIXED: dict[str, Any] = {
    "nodes": [
        {"id": "f", "type": "function", "function": "broken_until_fixed"},
    ]
}
NOOP: dict[str, Any] = {"nodes": [{"id": "a", "type": "function", "function": "noop"}]}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


def waiting_approval(http: httpx.Client, run_id: str) -> list[dict[str, Any]]:
    def listed() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = http.get(
            "/api/v1/approvals", params={"run_id": run_id}
        ).json()
        return found

    return wait_until(listed, timeout=30, what=f"{run_id} waiting for approval")


def test_a_waiting_node_is_approved_with_edited_args_over_http(api: ApiServer) -> None:
    client: Client = api.client
    run_id = client.submit(GATED).run_id
    with api.http("operate") as http:
        [waiting] = waiting_approval(http, run_id)
        assert waiting == approval_json(client.approvals.list(run_id)[0])
        assert waiting["args"] == {"params": {"parts": ["release", "v1"]}}
        edited = {"params": {"parts": ["release", "v2"]}}
        approved = http.post(
            f"/api/v1/runs/{run_id}/nodes/deploy/approve", json={"args": edited, "note": "ok"}
        )
        assert approved.status_code == 200, approved.text
        decided = approved.json()
        documented = ApprovalRequest.model_json_schema(mode="serialization")["properties"]
        assert set(decided) == set(documented)  # as the document says
        assert decided["status"] == "approved" and decided["decision"]["by"] == "test-operate"
        again = problem(http.post(f"/api/v1/runs/{run_id}/nodes/deploy/approve"), 409)
        assert again["error"] == "NotWaitingError"  # a state that forbids it: a conflict
        unknown = problem(http.post(f"/api/v1/runs/{run_id}/nodes/nope/approve"), 404)
        assert unknown["error"] == "UnknownNodeError"
    state = client.wait(run_id, timeout=30)
    assert state.nodes["deploy"].output == "release v2"


def test_a_waiting_node_is_rejected_over_http(api: ApiServer) -> None:
    run_id = api.client.submit(GATED).run_id
    with api.http("operate") as http:
        waiting_approval(http, run_id)
        rejected = http.post(
            f"/api/v1/runs/{run_id}/nodes/deploy/reject", json={"reason": "not on a Friday"}
        )
        assert rejected.status_code == 200, rejected.text
    state = api.client.wait(run_id, timeout=30)
    assert state.status.value == "failed"
    assert state.nodes["deploy"].error is not None
    assert "not on a Friday" in state.nodes["deploy"].error.message


def test_dead_letters_are_listed_shown_replayed_and_purged(api: ApiServer) -> None:
    client: Client = api.client
    failed = client.submit(BROKEN_UNTIL_FIXED).run_id
    assert client.wait(failed, timeout=30).status.value == "failed"
    with api.http("operate") as http:
        [listed] = http.get("/api/v1/dlq", params={"run_id": failed}).json()
        assert listed["node_id"] == "f" and "traceback" not in listed
        shown = http.get(f"/api/v1/dlq/{listed['id']}").json()
        assert set(listed) == set(DeadLetterSummary.model_fields)  # as the document says
        assert set(shown) == set(DeadLetter.model_fields)
        DeadLetterSummary.model_validate(listed)
        assert "the input of f is wrong" in shown["message"] and "traceback" in shown
        assert http.get("/api/v1/dlq/stats").json()["total"] == 1
        client.runtime.client.set(fixed_key(failed), 1)  # the cause, fixed
        replayed = http.post(f"/api/v1/dlq/{listed['id']}/replay", json={"fresh": False})
        assert replayed.status_code == 200, replayed.text
        assert replayed.json()["replayed"] is True
        assert client.wait(failed, timeout=30).status.value == "succeeded"
        again = problem(http.post(f"/api/v1/dlq/{listed['id']}/replay"), 409)
        assert again["error"] == "NotReplayableError"  # replayed already: a conflict
        unknown = problem(http.get("/api/v1/dlq/0-1"), 404)
        assert unknown["error"] == "UnknownDeadLetterError"
        forbidden = problem(http.delete(f"/api/v1/dlq/{listed['id']}"), 403)
        assert "admin" in forbidden["detail"]
    with api.http("admin") as http:
        assert http.delete(f"/api/v1/dlq/{listed['id']}").json() == {"purged": 1}
        assert http.get("/api/v1/dlq").json() == []


def test_schedules_are_created_paused_resumed_fired_and_deleted(api: ApiServer) -> None:
    with api.http("admin") as http:
        schedule = {
            "name": "daily",
            "cron": "0 9 * * 1-5",
            "timezone": "Europe/Paris",
            "plan": NOOP,
        }
        created = http.post("/api/v1/schedules", json=schedule)
        assert created.status_code == 201, created.text
        assert created.json()["cron"] == "0 9 * * 1-5" and created.json()["next_fire_at"]
        taken = problem(http.post("/api/v1/schedules", json=schedule), 422)
        assert "exists already" in taken["detail"]
        bad = problem(
            http.post("/api/v1/schedules", json={**schedule, "name": "x", "cron": "9"}), 422
        )
        assert bad["error"] == "ScheduleError"
        [listed] = http.get("/api/v1/schedules").json()
        assert listed["name"] == "daily"
    with api.http("operate") as http:
        assert http.post("/api/v1/schedules/daily/pause").json()["paused"] is True
        assert http.get("/api/v1/schedules/daily").json()["paused"] is True
        assert http.post("/api/v1/schedules/daily/resume").json().get("paused") in (False, None)
        fired = http.post("/api/v1/schedules/daily/run")
        assert fired.status_code == 200, fired.text
        run_id = fired.json()["run_id"]
        assert api.client.wait(run_id, timeout=30).status.value == "succeeded"
    with api.http("admin") as http:
        assert http.delete("/api/v1/schedules/daily").json() == {"removed": "daily"}
        gone = problem(http.get("/api/v1/schedules/daily"), 404)
        assert gone["error"] == "UnknownScheduleError" and "no schedule 'daily'" in gone["detail"]


def test_worker_types_health_and_the_openapi_document(api: ApiServer) -> None:
    with api.http("read") as http:
        types = http.get("/api/v1/worker-types").json()
        assert {"function", "python", "researcher"} <= {row["name"] for row in types}
        assert http.get("/api/v1/health").json()["status"] == "ok"
        document = http.get("/api/v1/openapi.json").json()
    paths = set(document["paths"])
    assert {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/events",
        "/api/v1/runs/{run_id}/nodes/{node_id}",
        "/api/v1/runs/{run_id}/nodes/{node_id}/approve",
        "/api/v1/dlq/{entry_id}/replay",
        "/api/v1/schedules/{name}/run",
        "/api/v1/worker-types",
        "/api/v1/whoami",
    } <= paths
