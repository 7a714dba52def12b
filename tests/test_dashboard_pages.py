"""The dashboard's pages over real HTTP (no browser): who may see them, the login and
logout, the cookie's flags, the security headers, and that untrusted text stays text."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from dagwright import PlanBuilder
from dagwright.server.sessions import SESSION_COOKIE
from tests.support import browser as browser_support
from tests.support.api_server import ApiServer

PAGES = ["/", "/runs/some-run", "/dlq", "/schedules", "/evals", "/evals/ev_some-eval"]


def anonymous(api: ApiServer) -> httpx.Client:
    return httpx.Client(base_url=api.url, timeout=10)


def logged_in(api: ApiServer, scope: str = "operate") -> tuple[httpx.Client, str]:
    """A client holding a session cookie, and the session's CSRF token."""
    visitor = anonymous(api)
    answer = visitor.post("/login", data={"token": api.token(scope), "next": "/dlq"})
    assert answer.status_code == 303 and answer.headers["location"] == "/dlq"
    page = visitor.get("/dlq")
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert found is not None
    return visitor, found.group(1)


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_credentials_goes_to_the_login(api: ApiServer, path: str) -> None:
    with anonymous(api) as visitor:
        answer = visitor.get(path)
        assert answer.status_code == 303
        assert answer.headers["location"].startswith("/login?next=%2F")
        assert visitor.get(path, auth=("", api.token("read"))).status_code == 200
        bearer = {"Authorization": f"Bearer {api.token('read')}"}
        assert visitor.get(path, headers=bearer).status_code == 200
        assert visitor.get(path, auth=("", "dw_wrong")).status_code == 303


def test_login_sets_a_strict_http_only_cookie_and_logout_needs_the_csrf_token(
    api: ApiServer,
) -> None:
    visitor = anonymous(api)
    answer = visitor.post("/login", data={"token": api.token("read"), "next": "/schedules"})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("dw_session=")
    assert all(flag in cookie for flag in ("HttpOnly", "Path=/", "SameSite=strict"))
    assert "Secure" not in cookie  # plain http on loopback; https requests get Secure
    assert api.token("read") not in answer.text + cookie

    visitor, csrf = logged_in(api, "read")
    assert visitor.get("/api/v1/whoami").json()["csrf_token"] == csrf
    assert visitor.post("/logout").status_code == 403  # no CSRF token: still logged in
    assert visitor.get("/dlq").status_code == 200
    out = visitor.post("/logout", data={"csrf_token": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert visitor.get("/dlq").status_code == 303
    assert visitor.get("/api/v1/runs").status_code == 401


def test_a_wrong_token_is_refused_and_next_stays_on_this_site(api: ApiServer) -> None:
    with anonymous(api) as visitor:
        refused = visitor.post("/login", data={"token": "dw_" + "x" * 43})
        assert refused.status_code == 401
        assert "not valid" in refused.text and "set-cookie" not in refused.headers
        for away in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
            answer = visitor.post("/login", data={"token": api.token(), "next": away})
            assert answer.headers["location"] == "/"


def test_revoking_the_token_ends_its_dashboard_session(api: ApiServer) -> None:
    visitor, _ = logged_in(api, "read")
    [info] = [t for t in api.client.tokens.list() if t.name == "test-read"]
    api.client.tokens.revoke(info.id)
    assert visitor.get("/dlq").status_code == 303


def test_pages_carry_a_strict_content_security_policy_and_escape_what_they_show(
    api: ApiServer,
) -> None:
    with anonymous(api) as visitor:
        page = visitor.get("/runs/<img src=x onerror=alert(1)>", auth=("", api.token("read")))
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert "<img" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in page.text.replace('<script type="module"', "")  # none inline


def test_static_files_are_served_and_nothing_outside_them(api: ApiServer) -> None:
    with anonymous(api) as visitor:
        module = visitor.get("/static/js/run-page.js")
        assert module.status_code == 200
        assert module.headers["content-type"].startswith("text/javascript")
        dagre = visitor.get("/static/vendor/dagre/dagre.esm.js")
        assert dagre.status_code == 200 and "export{" in dagre.text
        for outside in ("/static/../rendering.py", "/static/%2e%2e/visitors.py", "/static/x.py"):
            assert visitor.get(outside).status_code == 404


def test_the_runs_page_lists_what_the_api_lists(api: ApiServer) -> None:
    plan = PlanBuilder("<b>not bold</b>")
    plan.function("only", "concat", params={"parts": ["x"]})
    run = api.client.submit(plan.build())
    visitor, _ = logged_in(api, "read")
    page = visitor.get("/")
    assert page.status_code == 200 and 'src="/static/js/runs.js' in page.text
    listed = visitor.get("/api/v1/runs").json()["runs"]
    assert [r["run_id"] for r in listed] == [run.run_id]
    assert "<b>not bold</b>" not in page.text  # the goal reaches the page only as text


def test_a_missing_browser_skips_the_browser_tests_unless_ci_requires_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(browser_support, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("DAGWRIGHT_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-chromium is missing"):
        browser_support.skip_or_fail_without_browser()
    monkeypatch.setenv("DAGWRIGHT_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="DAGWRIGHT_REQUIRE_BROWSER=1 but"):
        browser_support.skip_or_fail_without_browser()


def test_a_login_posted_by_another_site_is_refused(api: ApiServer) -> None:
    """Login CSRF: another site must not log the visitor in with the attacker's token."""
    form = {"token": api.token("read"), "next": "/"}
    with httpx.Client(base_url=api.url) as http:
        forged = http.post("/login", data=form, headers={"Sec-Fetch-Site": "cross-site"})
        assert forged.status_code == 403 and SESSION_COOKIE not in forged.cookies
        assert http.post("/login", data=form).status_code == 303
