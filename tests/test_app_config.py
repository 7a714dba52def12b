"""The Celery configuration docs/internals/celery.md requires, pinned."""

from __future__ import annotations

import pytest

from dagwright.app import broker_identity, celery_config, create_app, kombu_url
from dagwright.errors import ConfigurationError
from dagwright.settings import Settings
from dagwright.tasks import queues_for
from dagwright.workers import builtin_registry


def test_reliability_and_security_settings() -> None:
    settings = Settings(max_timeout_s=600)
    conf = celery_config(settings, "redis://localhost/0")
    assert (
        conf["task_serializer"] == conf["result_serializer"] == conf["event_serializer"] == "json"
    )
    assert conf["accept_content"] == conf["result_accept_content"] == ["json"]
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["task_acks_on_failure_or_timeout"]
    assert conf["worker_prefetch_multiplier"] == 1
    assert conf["worker_lost_wait"] <= 1.0
    assert conf["task_ignore_result"] and conf["result_backend"] is None
    assert conf["worker_send_task_events"] and conf["task_send_sent_event"]
    assert conf["broker_connection_retry_on_startup"]
    transport = conf["broker_transport_options"]
    assert transport["visibility_timeout"] == 1200
    assert conf["task_soft_time_limit"] < conf["task_time_limit"] < transport["visibility_timeout"]
    assert transport["socket_timeout"] and transport["health_check_interval"]


def test_the_app_refuses_pickle() -> None:
    app = create_app(Settings(), "redis://localhost/0")
    assert "pickle" not in app.conf.accept_content
    assert app.conf.task_serializer == "json"


def test_unix_socket_urls_are_translated_for_kombu() -> None:
    settings = Settings()
    assert (
        kombu_url("unix:///run/v.sock?db=3", settings)
        == "redis+socket:///run/v.sock?virtual_host=3"
    )
    assert kombu_url("redis://h:1/0", settings) == "redis://h:1/0"


def test_a_brokers_identity_names_its_server_and_database_never_its_credentials() -> None:
    assert broker_identity("redis://user:s3cret@h:6379/3") == "redis://h:6379/3"
    assert broker_identity("rediss://:s3cret@h:6380/0?ssl_cert_reqs=none") == "rediss://h:6380/0"
    assert (
        broker_identity("redis+socket:///run/dw.sock?virtual_host=2")
        == "redis+socket:///run/dw.sock?virtual_host=2"
    )
    sentinels = "sentinel://u:s3cret@a:26379/0;sentinel://b:26379/0"
    assert broker_identity(sentinels) == "sentinel://a:26379/0;sentinel://b:26379/0"


def test_a_worker_serves_exactly_the_queues_named() -> None:
    """Compose and Kubernetes run one orchestrator service and one service per worker type,
    each scaled on its own queue: naming a type must not add the orchestrator's queue."""
    registry = builtin_registry()
    every = queues_for(None, registry)
    assert every[0] == "dw.orchestrator" and "dw.researcher" in every and "dw.python" in every
    assert queues_for(["orchestrator"], registry) == ["dw.orchestrator"]
    assert queues_for(["researcher", "researcher", "python"], registry) == [
        "dw.researcher",
        "dw.python",
    ]
    with pytest.raises(ConfigurationError, match=r"unknown worker type.*nonsense.*orchestrator"):
        queues_for(["nonsense"], registry)
