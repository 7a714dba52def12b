"""Redis as managed services run it: TLS with client certificates and an ACL user, and a
primary found through a Sentinel. Real servers started by the tests
(tests/support/managed_redis.py) and a real worker, for the state store and the broker
alike; one URL carries its credentials, the other takes them from the settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, RunStatus, Settings
from dagwright.doctor import Status, check_broker, check_redis
from dagwright.errors import BrokerUnavailableError
from dagwright.testing import FakeAnthropicServer
from tests.support.managed_redis import (
    ACL_PASSWORD,
    ACL_USER,
    PRIMARY_NAME,
    SENTINEL_PASSWORD,
    SentinelDeployment,
    TlsRedis,
    sentinel_deployment,
    tls_redis,
)
from tests.support.processes import Workers
from tests.support.settings import FAST_TIMINGS, TEST_API_KEY, TEST_DECLARATIONS
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

NOOP = {"nodes": [{"id": "a", "type": "function", "function": "noop"}]}


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    with tls_redis(tmp_path_factory.mktemp("tls")) as server:
        yield server


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelDeployment]:
    with sentinel_deployment(tmp_path_factory.mktemp("sentinel")) as deployment:
        yield deployment


@pytest.fixture(scope="module")
def tls_sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelDeployment]:
    with sentinel_deployment(tmp_path_factory.mktemp("tls-sentinel"), tls=True) as deployment:
        yield deployment


def deployment_settings(
    redis_url: str, broker_url: str, data_dir: Path, llm: FakeAnthropicServer, **access: object
) -> Settings:
    """The state store's URL with the ACL user's credentials, the broker's without: they
    come from ``redis_username`` / ``redis_password``."""
    return Settings(
        redis_url=redis_url,
        broker_url=broker_url,
        redis_username=ACL_USER,
        redis_password=SecretStr(ACL_PASSWORD),
        data_dir=data_dir,
        anthropic_base_url=llm.base_url,
        anthropic_api_key=SecretStr(TEST_API_KEY),
        **{"imports": [TEST_DECLARATIONS], **FAST_TIMINGS, **access},
    )


def tls_settings(server: TlsRedis, data_dir: Path, llm: FakeAnthropicServer) -> Settings:
    files = server.certificates
    return deployment_settings(
        server.url(0, with_credentials=True),
        server.url(1, with_credentials=False),
        data_dir,
        llm,
        redis_tls_ca_file=files.ca,
        redis_tls_cert_file=files.client_cert,
        redis_tls_key_file=files.client_key,
    )


def sentinel_settings(
    deployment: SentinelDeployment, data_dir: Path, llm: FakeAnthropicServer
) -> Settings:
    files = deployment.certificates
    tls = (
        {}
        if files is None
        else {
            "redis_tls_ca_file": files.ca,
            "redis_tls_cert_file": files.client_cert,
            "redis_tls_key_file": files.client_key,
        }
    )
    return deployment_settings(
        deployment.url(0, with_credentials=True),
        deployment.url(1, with_credentials=False),
        data_dir,
        llm,
        redis_sentinel_password=SecretStr(SENTINEL_PASSWORD),
        **tls,
    )


def run_a_plan_end_to_end(settings: Settings, workers: Workers) -> str:
    """A worker subprocess runs a three-node plan; returns the run id."""
    worker = workers.start(settings)
    plan = PlanBuilder("managed redis")
    first = plan.function("first", "noop")
    second = plan.function("second", "noop")
    plan.function("join", "concat", params={"parts": ["a", "b"]}, depends_on=[first, second])
    run = Client(settings).submit(plan.build())
    state = run.wait(timeout=60)
    assert state.status is RunStatus.SUCCEEDED, workers.log_tails()
    assert str(state.nodes["join"].output).startswith("a b")
    log = worker.log_path.read_text(errors="replace")
    assert ACL_PASSWORD not in log and SENTINEL_PASSWORD not in log
    return run.run_id


def test_state_and_broker_over_tls_with_an_acl_user(
    tls_server: TlsRedis, workers: Workers, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    settings = tls_settings(tls_server, tmp_path / "data", fake_llm)
    run_id = run_a_plan_end_to_end(settings, workers)
    direct = tls_server.client(db=0)
    assert any(run_id in key for key in direct.scan_iter(match="dw:*", count=1000))


def test_doctor_reaches_a_tls_server_and_names_a_certificate_it_cannot_verify(
    tls_server: TlsRedis, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    settings = tls_settings(tls_server, tmp_path / "data", fake_llm)
    assert check_redis(settings.redis.url, settings.redis).status is Status.OK
    assert check_broker(settings.redis.broker_url, settings.redis).status is Status.OK

    untrusted = settings.model_copy(update={"redis_tls_ca_file": None})
    check = check_redis(untrusted.redis.url, untrusted.redis)
    assert check.status is Status.FAIL
    assert "certificate verify failed" in check.detail.lower()
    assert "DAGWRIGHT_REDIS_TLS_CA_FILE" in check.hint
    with pytest.raises(BrokerUnavailableError, match="DAGWRIGHT_REDIS_TLS_CA_FILE"):
        Client(untrusted).list_runs()
    assert ACL_PASSWORD not in check.detail


def test_state_and_broker_through_a_sentinel(
    sentinel: SentinelDeployment, workers: Workers, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    settings = sentinel_settings(sentinel, tmp_path / "data", fake_llm)
    run_id = run_a_plan_end_to_end(settings, workers)
    primary = sentinel.primary(db=0)
    assert any(run_id.encode() in key for key in primary.scan_iter(match="dw:*", count=1000))
    check = check_redis(settings.redis.url, settings.redis)
    assert check.status is Status.OK and PRIMARY_NAME in check.detail


def test_beat_fires_a_schedule_through_a_sentinel(
    sentinel: SentinelDeployment, workers: Workers, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    """redbeat's entries and lock live in the state store: through the Sentinel too."""
    settings = sentinel_settings(sentinel, tmp_path / "data", fake_llm)
    workers.start(settings)
    beat = workers.start_beat(settings)
    client = Client(settings)
    client.schedules.add("tick", every_s=1, plan=NOOP)
    wait_until(
        lambda: any(
            fire.outcome == "started" for fire in client.schedules.get("tick", history=10).history
        ),
        timeout=30,
        what="a run started by the schedule",
    )
    assert beat.process.poll() is None, beat.log_tail()
    assert SENTINEL_PASSWORD not in beat.log_path.read_text(errors="replace")
    assert ACL_PASSWORD not in beat.log_path.read_text(errors="replace")


def test_state_and_broker_through_a_sentinel_over_tls(
    tls_sentinel: SentinelDeployment,
    workers: Workers,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    """``sentinels://``: TLS to the Sentinel and to the primary it names."""
    settings = sentinel_settings(tls_sentinel, tmp_path / "data", fake_llm)
    run_id = run_a_plan_end_to_end(settings, workers)
    keys = tls_sentinel.primary(db=0).scan_iter(match="dw:*", count=1000)
    assert any(run_id.encode() in key for key in keys)


def test_a_primary_the_sentinel_does_not_know_is_one_line(
    sentinel: SentinelDeployment, fake_llm: FakeAnthropicServer, tmp_path: Path
) -> None:
    settings = sentinel_settings(sentinel, tmp_path / "data", fake_llm)
    unknown = settings.model_copy(
        update={"redis_url": settings.redis.url.replace(PRIMARY_NAME, "nosuchprimary")}
    )
    with pytest.raises(BrokerUnavailableError, match="nosuchprimary") as caught:
        Client(unknown).list_runs()
    assert ACL_PASSWORD not in str(caught.value)
