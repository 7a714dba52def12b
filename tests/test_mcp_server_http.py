"""``/mcp`` of ``dagwright server``, driven by the real ``mcp`` client SDK over streamable
HTTP against real workers: the API's tokens and scopes hold, anonymous clients are
refused, bodies are bounded."""

from __future__ import annotations

import json

import httpx
import pytest

from dagwright.json_views import event_json
from tests.support.api_server import ApiServer
from tests.support.mcp_sessions import GATED, ToolFailed, http_session, run

pytestmark = pytest.mark.usefixtures("worker")

DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_an_anonymous_or_wrong_credential_is_refused_before_the_sdk(api: ApiServer) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        refused = httpx.post(f"{api.url}/mcp", json=DISCOVER, headers={**ACCEPT, **headers})
        assert refused.status_code == 401, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "Traceback" not in refused.text

    async def session() -> None:
        # the SDK's client reports the 401 as a failed exchange (its own error class)
        with pytest.raises(BaseException, match="error"):
            async with http_session(f"{api.url}/mcp", token=None) as mcp:
                await mcp.call("list_runs")

    run(session)


def test_basic_credentials_sent_by_another_sites_page_are_refused(api: ApiServer) -> None:
    basic = httpx.BasicAuth("", api.token("operate"))
    own = httpx.post(f"{api.url}/mcp", json=DISCOVER, headers=ACCEPT, auth=basic)
    assert own.status_code == 200, own.text  # Basic, from a client: let in
    foreign = {**ACCEPT, "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    refused = httpx.post(f"{api.url}/mcp", json=DISCOVER, headers=foreign, auth=basic)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "CSRFError"


def test_a_body_over_the_limit_is_refused_unread(api: ApiServer) -> None:
    limit = api.client.settings.server.max_request_bytes
    with api.http("operate") as http:
        refused = http.post("/mcp", content=b"x" * (limit + 1), headers=ACCEPT)
    assert refused.status_code == 413, refused.text


def test_a_read_token_follows_and_reads_but_cannot_submit_cancel_or_decide(api: ApiServer) -> None:
    run_id = api.client.submit(GATED).run_id

    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("read")) as mcp:
            assert (await mcp.call("get_run", run_id=run_id))["run_id"] == run_id
            assert {kind["name"] for kind in await mcp.call("list_worker_types")} >= {"function"}
            with pytest.raises(ToolFailed, match="needs the operate scope; your token has read"):
                await mcp.call("submit_run", plan=GATED)
            with pytest.raises(ToolFailed, match="operate scope"):
                await mcp.call("cancel_run", run_id=run_id)
            await mcp.until("list_approvals", bool, run_id=run_id)
            with pytest.raises(ToolFailed, match="operate scope"):
                await mcp.call(
                    "decide_approval", run_id=run_id, node_id="deploy", decision="approve"
                )

    run(session)
    assert api.client.status(run_id).status.value == "running"  # nothing was done


def test_an_operator_submits_approves_and_reads_the_result_over_http(api: ApiServer) -> None:
    async def session() -> None:
        async with http_session(f"{api.url}/mcp", api.token("operate")) as mcp:
            submitted = await mcp.call("submit_run", plan=GATED, idempotency_key="deploy-1")
            again = await mcp.call("submit_run", plan=GATED, idempotency_key="deploy-1")
            assert again["run_id"] == submitted["run_id"]
            run_id = submitted["run_id"]
            waiting = await mcp.call("follow_run", run_id=run_id, wait_s=30)
            assert waiting["counts"]["waiting_approval"] == 1
            decided = await mcp.call(
                "decide_approval", run_id=run_id, node_id="deploy", decision="approve"
            )
            assert decided["decision"]["by"] == "test-operate"  # the token's name
            assert (await mcp.call("follow_run", run_id=run_id, wait_s=30))["status"] == "succeeded"
            answer = await mcp.call("get_result", run_id=run_id)
            assert answer == {"run_id": run_id, "result": "release v1"}
            assert json.loads(await mcp.read(f"dagwright://runs/{run_id}/result")) == answer
            trace = json.loads(await mcp.read(f"dagwright://runs/{run_id}/trace"))
            assert trace == api.client.trace(run_id).model_dump(mode="json")
            events = json.loads(await mcp.read(f"dagwright://runs/{run_id}/events"))
            stored = api.client.events(run_id, follow=False)
            assert events == [event_json(event) for event in stored]
            assert "node.succeeded" in {event["kind"] for event in events}
            kinds = json.loads(await mcp.read("dagwright://worker-types"))
            assert kinds == api.client.worker_types()
            with pytest.raises(ToolFailed, match="nope"):
                await mcp.read("dagwright://runs/nope/result")

    run(session)
