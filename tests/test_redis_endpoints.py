"""How a Redis URL and the ``redis_*`` settings become the options of redis-py (state
store) and kombu (broker): TLS, credentials, Sentinel. The servers themselves are
exercised in tests/test_managed_redis.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from dagwright.app import celery_config, kombu_url
from dagwright.connection import connect, redact_url
from dagwright.errors import ConfigurationError
from dagwright.redaction import known_secrets, redact
from dagwright.redis_endpoint import parse_sentinel_url, tls_options
from dagwright.settings import Settings


def test_a_sentinel_url_names_every_sentinel_the_primary_and_the_database() -> None:
    target = parse_sentinel_url("sentinel://app:p%40ss@s1:26380,s2,[::1]:26381/prime/3")
    assert target.sentinels == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (target.primary_name, target.db, target.tls) == ("prime", 3, False)
    assert (target.username, target.password) == ("app", "p@ss")
    assert parse_sentinel_url("sentinels://s1/prime").tls
    assert parse_sentinel_url("sentinels://s1/prime").db == 0


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("sentinel://s1:26379", "primary's name"),
        ("sentinel://s1:26379/prime/zero", "'zero' is not a number"),
        ("sentinel://s1:port/prime", "'port' is not a port"),
        ("sentinel://:secret-pw@s1,/prime", "names no host"),
    ],
)
def test_a_malformed_sentinel_url_is_one_line_without_its_password(url: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as caught:
        connect(url)
    assert "secret-pw" not in str(caught.value)
    assert "primary-name" in str(caught.value)  # the form to write


def test_tls_options_carry_the_files_and_the_verification() -> None:
    settings = Settings(
        redis_tls_ca_file=Path("/ca.pem"),
        redis_tls_cert_file=Path("/c.pem"),
        redis_tls_key_file=Path("/c.key"),
    )
    assert tls_options(settings.redis) == {
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
        "ssl_ca_certs": "/ca.pem",
        "ssl_certfile": "/c.pem",
        "ssl_keyfile": "/c.key",
    }
    unverified = Settings(redis_tls_cert_reqs="none").redis
    assert tls_options(unverified) == {"ssl_cert_reqs": "none", "ssl_check_hostname": False}


def test_the_broker_gets_tls_only_for_a_tls_url() -> None:
    settings = Settings(redis_tls_ca_file=Path("/ca.pem"))
    assert celery_config(settings, "rediss://h:6380/0")["broker_use_ssl"]["ssl_ca_certs"] == (
        "/ca.pem"
    )
    assert celery_config(settings, "redis://h:6379/0")["broker_use_ssl"] is None


def test_a_sentinel_broker_url_becomes_kombus_transport_and_options() -> None:
    settings = Settings(
        redis_username="app",
        redis_password=SecretStr("p@ss word"),
        redis_sentinel_password=SecretStr("sentinel-secret"),
    )
    conf = celery_config(settings, "sentinel://s1:26380,s2/prime/2")
    assert conf["broker_url"] == "sentinel://app:p%40ss%20word@s1:26380/2;sentinel://s2:26379/2"
    transport = conf["broker_transport_options"]
    assert transport["master_name"] == "prime"
    assert transport["sentinel_kwargs"] == {"password": "sentinel-secret"}
    assert conf["broker_use_ssl"] is None


def test_credentials_of_the_url_win_over_the_settings() -> None:
    settings = Settings(redis_username="other", redis_password=SecretStr("other-password"))
    assert kombu_url("redis://app:pw@h/0", settings) == "redis://app:pw@h/0"
    assert kombu_url("redis://h/0", settings) == "redis://other:other-password@h/0"
    client = connect("redis://h/0", settings.redis)
    assert client.connection_pool.connection_kwargs["username"] == "other"
    client = connect("redis://app:pw@h/0", settings.redis)
    assert client.connection_pool.connection_kwargs["username"] == "app"


def test_the_embedded_valkeys_socket_gets_no_password_meant_for_a_server() -> None:
    settings = Settings(redis_username="app", redis_password=SecretStr("server-password"))
    client = connect("unix:///run/valkey.sock?db=0", settings.redis)
    assert client.connection_pool.connection_kwargs.get("password") is None
    assert "server-password" not in kombu_url("unix:///run/valkey.sock?db=0", settings)


def test_redis_passwords_are_known_secrets_and_redacted_in_urls() -> None:
    settings = Settings(
        redis_url="redis://app:url%2Fpassword@h/0",
        redis_password=SecretStr("setting-password"),
        redis_sentinel_password=SecretStr("sentinel-password"),
    )
    secrets = known_secrets(settings)
    assert {"url/password", "setting-password", "sentinel-password"} <= set(secrets)
    text = "auth failed for url/password, setting-password and sentinel-password"
    assert redact(text, secrets).count("***") == 3
    assert redact_url("sentinel://app:pw@s1:1,s2:2/prime") == "sentinel://app:***@s1:1,s2:2/prime"
