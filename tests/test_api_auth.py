"""The API's doors: tokens (Bearer and Basic), scopes, no anonymous access, sessions and
CSRF, and the ``dagwright token`` and ``dagwright server`` commands."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import redis
from starlette.requests import Request
from starlette.responses import Response

from dagwright.server.sessions import (
    CSRF_HEADER,
    SESSION_COOKIE,
    end_session,
    set_session_cookie,
    start_session,
)
from dagwright.settings import Settings
from tests.support.api_server import ApiServer, running_server
from tests.support.cli import cli_env, dagwright, json_out, one_error_line

PROBLEM_KEYS = {"type", "title", "status", "detail", "error"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert set(body) >= PROBLEM_KEYS and body["status"] == status
    return body


def test_a_request_without_credentials_is_refused_with_a_challenge(api: ApiServer) -> None:
    with api.http(scope=None) as http:
        response = http.get("/api/v1/runs")
    body = assert_problem(response, 401)
    assert "Bearer" in response.headers["www-authenticate"]
    assert "Basic" in response.headers["www-authenticate"]
    assert "token" in str(body["detail"])


def test_bearer_and_basic_both_authenticate(api: ApiServer) -> None:
    token = api.token("read")
    with httpx.Client(base_url=api.url) as http:
        bearer = http.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
        basic = http.get("/api/v1/whoami", auth=("anyone", token))
        wrong = http.get("/api/v1/whoami", auth=("anyone", token + "x"))
    assert (
        bearer.json()
        == basic.json()
        == {
            "name": "test-read",
            "scope": "read",
            "anonymous": False,
            "csrf_token": None,
        }
    )
    assert_problem(wrong, 401)


@pytest.mark.parametrize(
    ("scope", "method", "path"),
    [
        ("read", "POST", "/api/v1/runs"),
        ("read", "POST", "/api/v1/runs/r1/cancel"),
        ("read", "POST", "/api/v1/runs/r1/nodes/n/approve"),
        ("read", "POST", "/api/v1/runs/r1/nodes/n/reject"),
        ("read", "POST", "/api/v1/dlq/1-0/replay"),
        ("operate", "DELETE", "/api/v1/dlq/1-0"),
        ("operate", "POST", "/api/v1/schedules"),
        ("operate", "DELETE", "/api/v1/schedules/nightly"),
    ],
)
def test_a_scope_too_low_is_forbidden(api: ApiServer, scope: str, method: str, path: str) -> None:
    with api.http(scope) as http:
        response = http.request(method, path, json={})
    body = assert_problem(response, 403)
    assert f"your token has {scope}" in str(body["detail"])


def test_no_server_lets_a_request_without_credentials_in(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """Not even one with local access (``dagwright up``'s) from its own user: a loopback
    port is open to every user of the machine (tests/test_local_access.py)."""
    with running_server(settings, local_access=True) as server, server.http(None) as http:
        assert_problem(http.get("/api/v1/whoami"), 401)
        bad = http.get("/api/v1/whoami", headers={"Authorization": "Bearer dw_wrong"})
        assert_problem(bad, 401)


@pytest.mark.parametrize("host", ["0.0.0.0", "evil.localhost", "127.1"])
def test_dagwright_server_refuses_local_access_off_loopback(host: str, tmp_path: Path) -> None:
    result = dagwright("server", "--host", host, "--local-access", env=cli_env(None, tmp_path))
    assert result.returncode == 2
    assert f"--local-access is refused on {host}" in one_error_line(result)


def test_a_revoked_token_is_refused(api: ApiServer, settings: Settings, tmp_path: Path) -> None:
    env = cli_env(settings, tmp_path)
    created = json_out(dagwright("token", "create", "ci", "--scope", "operate", "--json", env=env))
    assert created["token"].startswith("dw_") and len(created["token"]) == 46
    auth = {"Authorization": f"Bearer {created['token']}"}
    with httpx.Client(base_url=api.url, headers=auth) as http:
        assert http.get("/api/v1/whoami").json()["scope"] == "operate"
        listed = json_out(dagwright("token", "list", "--json", env=env))
        [entry] = [t for t in listed if t["id"] == created["id"]]
        assert entry["name"] == "ci" and entry["last_used_at"] is not None
        assert "token" not in entry and "sha256" not in entry
        revoked = dagwright("token", "revoke", created["id"], env=env)
        assert revoked.returncode == 0, revoked.stderr
        assert_problem(http.get("/api/v1/whoami"), 401)
    unknown = dagwright("token", "revoke", "nope", env=env)
    assert unknown.returncode == 2 and "no API token 'nope'" in one_error_line(unknown)
    bad_scope = dagwright("token", "create", "x", "--scope", "root", env=env)
    assert bad_scope.returncode == 2 and "unknown scope 'root'" in one_error_line(bad_scope)


def test_tokens_are_stored_only_as_their_hash(api: ApiServer, redis_client: redis.Redis) -> None:
    token = api.token("read")
    dump = [str(redis_client.dump(key)) + key for key in redis_client.scan_iter("*api-token*")]
    assert dump and not any(token in entry or token[3:] in entry for entry in dump)


def test_a_cookie_session_needs_its_csrf_token_to_change_anything(api: ApiServer) -> None:
    session = start_session(api.client, api.token("operate"))
    with httpx.Client(base_url=api.url, cookies={SESSION_COOKIE: session.session_id}) as http:
        who = http.get("/api/v1/whoami").json()
        assert who["csrf_token"] == session.csrf_token and who["scope"] == "operate"
        plan = {"plan": {"nodes": [{"id": "a", "type": "function", "function": "concat"}]}}
        refused = http.post("/api/v1/runs", json=plan)
        assert assert_problem(refused, 403)["error"] == "CSRFError"
        wrong = http.post("/api/v1/runs", json=plan, headers={CSRF_HEADER: "nope"})
        assert_problem(wrong, 403)
        accepted = http.post("/api/v1/runs", json=plan, headers={CSRF_HEADER: session.csrf_token})
        assert accepted.status_code == 201, accepted.text
        api.client.tokens.revoke(session.token_id)  # revoking the token ends the session
        assert_problem(http.get("/api/v1/whoami"), 401)


def test_the_session_cookie_is_http_only_strict_and_secure_over_https(api: ApiServer) -> None:
    session = start_session(api.client, api.token("read"))
    cookies = []
    for scheme in ("http", "https"):
        request = Request({"type": "http", "scheme": scheme, "headers": [], "path": "/"})
        response = Response()
        set_session_cookie(response, request, session, ttl_s=600)
        cookies.append(response.headers["set-cookie"])
    plain, secure = cookies
    assert plain.startswith(f"{SESSION_COOKIE}={session.session_id};")
    for part in ("HttpOnly", "Path=/", "SameSite=strict", "Max-Age=600"):
        assert part in plain and part in secure
    assert "Secure" not in plain and "Secure" in secure
    end_session(api.client, session.session_id)
    with httpx.Client(base_url=api.url, cookies={SESSION_COOKIE: session.session_id}) as http:
        assert_problem(http.get("/api/v1/whoami"), 401)


PLAN = {"plan": {"nodes": [{"id": "a", "type": "function", "function": "concat"}]}}
ANOTHER_SITE = {"Sec-Fetch-Site": "cross-site"}


def test_a_page_of_another_site_gets_nothing_of_a_local_access_server(
    settings: Settings, redis_client: redis.Redis
) -> None:
    """What any page the user opens could make the browser send to 127.0.0.1, or under a
    DNS-rebinding name: no credential, so nothing; the user's own tools hold the token."""
    with running_server(settings, local_access=True) as server, server.http(None) as http:
        assert_problem(http.post("/api/v1/runs", json=PLAN, headers=ANOTHER_SITE), 401)
        foreign_origin = {"Origin": "https://evil.example"}
        assert_problem(http.post("/api/v1/runs", json=PLAN, headers=foreign_origin), 401)
        assert_problem(http.get("/api/v1/runs", headers={"Host": "evil.example"}), 401)
        assert server.local_access is not None
        own = {"Authorization": f"Bearer {server.local_access.token}"}
        assert http.post("/api/v1/runs", json=PLAN, headers=own).status_code == 201


def test_cached_basic_credentials_change_nothing_for_another_site_but_a_bearer_token_does(
    api: ApiServer,
) -> None:
    token = api.token("operate")
    with httpx.Client(base_url=api.url) as http:
        basic = http.post("/api/v1/runs", json=PLAN, auth=("", token), headers=ANOTHER_SITE)
        assert assert_problem(basic, 403)["error"] == "CSRFError"
        assert http.get("/api/v1/runs", auth=("", token), headers=ANOTHER_SITE).status_code == 200
        bearer = {"Authorization": f"Bearer {token}", **ANOTHER_SITE}  # only code holding it
        assert http.post("/api/v1/runs", json=PLAN, headers=bearer).status_code == 201
