"""What the server shows and to whom (issue 30, item 8): no internal address in any
problem, the OpenAPI document behind authentication and no docs page loading scripts
from a CDN, and a Secure session cookie behind a trusted TLS proxy."""

from __future__ import annotations

import logging

import httpx
import pytest

from dagwright.settings import Settings
from tests.support.api_server import ApiServer, free_port, running_server


def test_a_503_names_no_redis_address_and_the_log_does(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there: Redis is "down"
    unreachable = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{port}/1"})
    with (
        running_server(unreachable) as server,
        caplog.at_level(logging.WARNING),
        server.http(None) as http,
    ):
        answer = http.get("/api/v1/whoami", headers={"Authorization": "Bearer dw_unchecked"})
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert str(port) not in answer.text and "127.0.0.1" not in answer.text
    assert answer.json()["error"] == "BrokerUnavailableError"
    assert "retry later" in answer.json()["detail"]
    assert f"127.0.0.1:{port}" in caplog.text  # the operator still learns where


def test_the_openapi_document_needs_a_token_and_no_docs_page_is_served(api: ApiServer) -> None:
    with api.http(None) as anonymous:
        assert anonymous.get("/api/v1/openapi.json").status_code == 401
        assert anonymous.get("/api/v1/docs").status_code in (401, 404)
    with api.http("read") as http:
        document = http.get("/api/v1/openapi.json")
        docs = http.get("/api/v1/docs")
    assert document.status_code == 200 and "/api/v1/runs" in document.json()["paths"]
    assert docs.status_code == 404  # FastAPI's page loads Swagger UI from a CDN


def login(server: ApiServer, **headers: str) -> httpx.Response:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        return http.post("/login", data={"token": server.token("read")}, headers=headers)


@pytest.mark.usefixtures("redis_client")
def test_behind_a_trusted_tls_proxy_the_session_cookie_is_secure(settings: Settings) -> None:
    proxied = settings.model_copy(update={"server_trusted_proxies": ["127.0.0.0/8"]})
    with running_server(proxied) as server:
        over_https = login(server, **{"X-Forwarded-Proto": "https"})
        over_http = login(server)
    assert over_https.status_code == 303, over_https.text
    assert "secure" in over_https.headers["set-cookie"].lower()
    assert "secure" not in over_http.headers["set-cookie"].lower()


@pytest.mark.usefixtures("redis_client")
def test_an_untrusted_client_cannot_claim_https(api: ApiServer) -> None:
    forged = login(api, **{"X-Forwarded-Proto": "https", "X-Forwarded-For": "10.1.2.3"})
    assert forged.status_code == 303, forged.text
    assert "secure" not in forged.headers["set-cookie"].lower()


def test_trusted_proxies_are_addresses_or_networks() -> None:
    assert Settings(server_trusted_proxies="10.0.0.5, 10.1.0.0/16").server.trusted_proxies == [
        "10.0.0.5",
        "10.1.0.0/16",
    ]
    with pytest.raises(ValueError, match="not an IP address or network"):
        Settings(server_trusted_proxies="*")
