"""``dagwright doctor`` against a real Valkey, with and without a live worker."""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, RunFailedError
from dagwright.doctor import (
    Fleet,
    Status,
    breaker_check,
    check_llm,
    check_sandbox,
    check_sandbox_memory,
    check_sandbox_packages,
    fleet_checks,
)
from dagwright.errors import BreakerOpenError
from dagwright.keys import Keys
from dagwright.orchestrator.runtime import Runtime
from dagwright.resilience.breakers import BreakerStatus
from dagwright.settings import Settings
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.waiting import wait_until

CHECKS = [
    "redis",
    "broker",
    "workers",
    "reconciler",
    "breakers",
    "dlq",
    "beat",
    "sandbox",
    "sandbox-memory",
    "sandbox-packages",
    "llm",
    "models",
]
UNREACHABLE = "redis://:s3cret@127.0.0.1:1/0"


def doctor_json(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    result = dagwright("doctor", "--json", env=env)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json_out(result)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {check["name"]: check for check in report["checks"]}


@pytest.fixture
def live_env(settings: Settings, worker: Any, redis_client: redis.Redis, tmp_path: Path) -> Any:
    """The CLI environment of the in-process worker's databases, once the worker has
    announced itself again and its reconciler holds the lock (the databases were emptied)."""
    keys = Keys(settings.redis.key_prefix)
    wait_until(
        lambda: any(redis_client.scan_iter(keys.worker_heartbeat_pattern)),
        timeout=15,
        what="the worker's presence record",
    )
    lease = keys.reconciler_bucket_lease(0)
    wait_until(lambda: redis_client.exists(lease), timeout=15, what="the reconciler's lease")
    return cli_env(settings, tmp_path / "data")


def test_with_a_live_worker_every_check_passes_or_only_warns(live_env: dict[str, str]) -> None:
    code, report = doctor_json(live_env)
    assert code == 0 and report["ok"] is True, report
    names = [check["name"] for check in report["checks"]]
    workers = [name for name in names if name.startswith("worker ")]
    assert [name for name in names if name not in workers] == CHECKS
    checks = by_name(report)
    # One line per live worker: what it can run, as a submit checks plans against it.
    assert len(workers) == 1 and checks[workers[0]]["status"] == "ok"
    detail = checks[workers[0]]["detail"]
    assert "types: " in detail and "planner" in detail and "noop" in detail
    assert "imports: tests.support.functions" in detail and "LLM: anthropic api key" in detail
    for name in ("broker", "workers", "reconciler", "breakers", "dlq", "beat", "llm"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks["redis"]["status"] in ("ok", "warn")  # the test Valkey has no AOF
    assert checks["sandbox"]["status"] in ("ok", "warn")  # depends on this host
    assert re.match(
        r"1 live worker · (\d+)/\1 queues served · 0 messages waiting$", checks["workers"]["detail"]
    )
    assert "test-key" not in str(report)  # the API key is never shown


def test_a_worker_on_another_broker_than_the_clients_warns_naming_both(
    settings: Settings, live_env: dict[str, str], tmp_path: Path
) -> None:
    # The same state store (so doctor sees the worker), another broker database: the
    # client's messages would never reach the worker.
    server = (settings.redis.url or "").rsplit("/", 1)[0]
    other = settings.model_copy(update={"broker_url": f"{server}/5"})
    _, report = doctor_json(cli_env(other, tmp_path / "data"))
    worker = next(check for check in report["checks"] if check["name"].startswith("worker "))
    assert worker["status"] == "warn", report
    assert re.search(r"consumes from broker redis://127\.0\.0\.1:\d+/0, ", worker["hint"])
    assert re.search(r"this client publishes to redis://127\.0\.0\.1:\d+/5: ", worker["hint"])
    same = by_name(doctor_json(live_env)[1])
    assert all(
        check["status"] == "ok" for name, check in same.items() if name.startswith("worker ")
    )


@pytest.mark.subprocess
def test_human_output_is_a_line_per_check_and_a_verdict(live_env: dict[str, str]) -> None:
    result = dagwright("doctor", env=live_env)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if not line.lstrip().startswith("→")]
    names = [line.split()[1] for line in lines]
    assert [name for name in names if name != "worker"] == CHECKS
    assert lines[2].startswith("✔ workers") and lines[3].startswith("✔ worker ")
    assert "Traceback" not in result.stderr
    assert "failure" not in result.stderr


def test_no_live_worker_fails(no_worker_settings: Settings, tmp_path: Path) -> None:
    code, report = doctor_json(cli_env(no_worker_settings, tmp_path / "data"))
    assert code == 1 and report["ok"] is False
    workers = by_name(report)["workers"]
    assert workers["status"] == "fail"
    assert workers["detail"].startswith("no live workers")
    assert "`dagwright worker`" in workers["hint"]
    assert by_name(report)["redis"]["status"] in ("ok", "warn")


def test_a_queue_without_consumer_warns_and_fails_once_messages_wait(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    state = redis.Redis.from_url(no_worker_settings.redis.url or "", decode_responses=True)
    presence = Keys(no_worker_settings.redis.key_prefix).worker_heartbeat("only-functions@test")
    state.hset(presence, mapping={"queues": "dw.function,dw.orchestrator", "pid": 1})
    state.expire(presence, 60)
    broker = redis.Redis.from_url(no_worker_settings.redis.broker_url or "", decode_responses=True)
    broker.lpush("dw.writer", '{"not": "read"}')
    code, report = doctor_json(cli_env(no_worker_settings, tmp_path / "data"))
    checks = by_name(report)
    assert code == 1
    assert checks["workers"]["status"] == "ok"
    assert checks["workers"]["detail"].startswith("1 live worker · 2/")
    assert checks["queue dw.writer"]["status"] == "fail"
    assert checks["queue dw.writer"]["detail"].startswith("1 message waiting")
    assert "`dagwright worker -t writer`" in checks["queue dw.writer"]["hint"]
    assert checks["queue dw.coder"]["status"] == "warn"
    assert "queue dw.function" not in checks


def test_an_open_breaker_fails_naming_it(settings: Settings, live_env: dict[str, str]) -> None:
    runtime = Runtime.from_settings(settings)

    def unreachable_api() -> None:
        raise ConnectionError("down")

    for _ in range(settings.breakers.fail_max):
        with pytest.raises((ConnectionError, BreakerOpenError)):
            runtime.breakers.call("model:x", unreachable_api, is_failure=lambda exc: True)
    code, report = doctor_json(live_env)
    breakers = by_name(report)["breakers"]
    assert code == 1
    assert breakers["status"] == "fail"
    assert breakers["detail"].startswith("open: model:x (") and "s left)" in breakers["detail"]
    assert [c["name"] for c in report["checks"] if c["status"] == "fail"] == ["breakers"]


def test_a_pending_dead_letter_warns_without_failing(
    client: Client, live_env: dict[str, str]
) -> None:
    plan = PlanBuilder()
    plan.function("bad", "fail", params={"message": "no such customer"})
    with pytest.raises(RunFailedError):
        client.submit(plan.build()).result(timeout=30)
    code, report = doctor_json(live_env)
    dlq = by_name(report)["dlq"]
    assert code == 0 and report["ok"] is True
    assert dlq == {
        "name": "dlq",
        "status": "warn",
        "detail": "1 pending dead letter",
        "hint": "inspect with `dagwright dlq list`, then `dagwright dlq replay` or purge",
    }


@pytest.mark.subprocess
def test_an_unreachable_redis_fails_with_a_readable_line(tmp_path: Path) -> None:
    env = cli_env(None, tmp_path / "data", DAGWRIGHT_REDIS_URL=UNREACHABLE)
    code, report = doctor_json(env)
    checks = by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["redis"]["status"] == "fail"
    assert checks["redis"]["detail"].startswith("cannot reach Redis at redis://:***@127.0.0.1:1/0")
    assert {checks[name]["status"] for name in ("broker", "workers", "dlq")} == {"skip"}
    human = dagwright("doctor", env=env)
    assert human.returncode == 1
    assert "Traceback" not in human.stderr
    assert human.stdout.splitlines()[0].startswith("✘ redis")
    assert "s3cret" not in human.stdout + human.stderr + str(report)


def test_with_nothing_configured_doctor_says_run_brings_its_own_stack(tmp_path: Path) -> None:
    code, report = doctor_json(cli_env(None, tmp_path / "data"))
    redis_check = by_name(report)["redis"]
    assert code == 0  # a fresh machine: `dagwright run` works as it is
    assert redis_check["status"] == "skip"
    assert "`dagwright run` starts an embedded stack" in redis_check["detail"]
    assert "`dagwright up`" in redis_check["detail"]
    assert by_name(report)["llm"]["status"] == "warn"


# The pure parts, without Redis.


def test_the_llm_check_names_the_models_and_never_the_key() -> None:
    settings = Settings(
        anthropic_api_key=SecretStr("sk-very-secret"),
        anthropic_base_url=None,
        default_model="claude-haiku-5-5",
        planner_model="claude-opus-5-5",
    )
    check = check_llm(settings)
    assert check.status == Status.OK
    assert check.detail == "API key set · model claude-haiku-5-5 · planner model claude-opus-5-5"
    assert "sk-very-secret" not in str(check)


def test_the_llm_check_warns_of_a_model_with_no_price() -> None:
    settings = Settings(anthropic_base_url="http://fake", planner_model="claude-unpriced-9")
    check = check_llm(settings)
    assert check.status == Status.WARN
    assert "no price for claude-unpriced-9" in check.detail and "model_prices" in check.hint
    dated = Settings(anthropic_base_url="http://fake", default_model="claude-opus-4-5-20251101")
    assert check_llm(dated).status == Status.OK  # priced as its family


def test_the_sandbox_check_lists_working_backends_or_warns_with_each_reason() -> None:
    assert check_sandbox({"docker": "", "bubblewrap": ""}).detail == "works: docker, bubblewrap"
    half = check_sandbox({"docker": "docker: not available on this host", "bubblewrap": ""})
    assert half.status == Status.OK and half.detail == "works: bubblewrap"
    missing = check_sandbox({"docker": "docker: no daemon", "bubblewrap": "bubblewrap: no userns"})
    assert missing.status == Status.WARN and "bubblewrap: no userns" in missing.detail
    assert "refused" in missing.hint


def test_doctor_reports_bubblewrap_without_a_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    check = check_sandbox({"docker": "docker: no daemon", "bubblewrap": ""})
    assert check.status == Status.WARN
    assert check.detail == "works: bubblewrap; bubblewrap runs without a seccomp filter on riscv64"
    assert "docker backend" in check.hint
    only_docker = check_sandbox({"docker": "", "bubblewrap": "bubblewrap: no userns"})
    assert (only_docker.status, only_docker.detail) == (Status.OK, "works: docker")


def test_the_sandbox_memory_line_says_which_bound_holds() -> None:
    """A memory cgroup, the split over tasks where none can be made (a cgroup parent that
    cannot be created: the path of a host without one), or the refusal; docker: its
    container's cgroup."""
    no_cgroup = {"sandbox_backend": "bubblewrap", "sandbox_cgroup_parent": "/proc/dw-none"}
    split = check_sandbox_memory(Settings(**no_cgroup, sandbox_memory_mb=256))
    assert split.status == Status.WARN
    assert split.detail == (
        "bubblewrap: no memory cgroup here: each run is held to 4 tasks of 64 MiB address "
        "space each (RLIMIT_NPROC and RLIMIT_AS, 256 MiB in all)"
    )
    assert "sandbox_cgroup_parent" in split.hint
    refused = check_sandbox_memory(Settings(**no_cgroup, sandbox_memory_fallback_tasks=0))
    assert refused.status == Status.WARN and "refuses to run code" in refused.detail
    assert refused.hint.startswith("bubblewrap refuses python nodes here")
    docker = check_sandbox_memory(Settings(sandbox_backend="docker", sandbox_memory_mb=300))
    assert (docker.status, docker.detail) == (
        Status.OK,
        "docker: the container's cgroup holds each run to 300 MiB",
    )


def test_packages_declared_but_not_installed_warn(tmp_path: Path) -> None:
    none = check_sandbox_packages(Settings())
    assert (none.status, none.detail) == (
        Status.OK,
        "none declared (sandbox_packages): the standard library",
    )
    declared = Settings(
        sandbox_backend="bubblewrap",
        sandbox_packages=["six"],
        sandbox_packages_dir=tmp_path / "never-installed",
    )
    check = check_sandbox_packages(declared)
    assert check.status == Status.WARN
    assert check.detail == f"declared but not installed in {tmp_path / 'never-installed'}: six"
    assert "dagwright sandbox install" in check.hint


def test_a_half_open_breaker_or_one_whose_time_is_up_warns() -> None:
    closed = BreakerStatus("tool:a", "closed", 0, 0.0)
    assert breaker_check([closed]).detail == "1 breaker closed"
    probing = [closed, BreakerStatus("model:b", "half-open", 5, 0.0)]
    assert breaker_check(probing).status == Status.WARN
    time_up = BreakerStatus("model:c", "open", 5, 0.0)
    assert breaker_check([time_up]).detail == "half-open: model:c"
    assert breaker_check([]).status == Status.OK


def test_with_depths_unknown_an_unserved_queue_only_warns() -> None:
    fleet = Fleet(
        workers={"w@h": frozenset({"dw.orchestrator"})},
        queues={"dw.orchestrator": [], "dw.function": ["function"]},
        depths={"dw.orchestrator": None, "dw.function": None},
    )
    summary, queue = fleet_checks(fleet)
    assert summary.detail == "1 live worker · 1/2 queues served · queue depths unknown"
    assert (queue.name, queue.status) == ("queue dw.function", Status.WARN)


def test_active_schedules_without_a_beat_warn_and_a_running_beat_is_seen(
    subprocess_settings: Settings, workers: Any, tmp_path: Path
) -> None:
    env = cli_env(subprocess_settings, tmp_path / "data")
    client = Client(subprocess_settings)
    client.schedules.add(
        "hourly",
        every_s=3600,
        plan={"nodes": [{"id": "a", "type": "function", "function": "noop"}]},
    )
    _, report = doctor_json(env)
    beat = by_name(report)["beat"]
    assert beat["status"] == "warn" and "no beat is running" in beat["detail"]
    workers.start_beat(subprocess_settings)
    keys = Keys(subprocess_settings.redis.key_prefix)
    wait_until(lambda: client.runtime.client.exists(keys.beat_lock), timeout=30, what="beat")
    _, report = doctor_json(env)
    assert by_name(report)["beat"]["detail"] == "a beat is active · 1 active schedule"


def test_the_trace_export_is_checked_only_when_an_endpoint_is_set(settings: Settings) -> None:
    """Without the opentelemetry extra the check says which to install (the extras-free
    install's test, tests/test_bare_install.py); with it, where traces go."""
    from dagwright.doctor import Status, check_otlp

    assert check_otlp(settings.model_copy(update={"otlp_endpoint": None})) == []
    (check,) = check_otlp(settings.model_copy(update={"otlp_endpoint": "http://collector:4318"}))
    assert check.status == Status.OK
    assert check.detail == "traces exported to http://collector:4318/v1/traces"


def test_a_worker_without_an_llm_is_told_to_restart_with_the_variable() -> None:
    """Workers read the variable when they start: setting it later changes nothing."""
    from dagwright.doctor import llm_hints
    from dagwright.workers.capabilities import WorkerCapabilities

    worker = WorkerCapabilities(frozenset({"researcher", "function"}), frozenset(), (), "")
    (hint,) = llm_hints(worker, {"researcher", "writer"})
    assert hint == (
        "its researcher nodes cannot call a model: set ANTHROPIC_API_KEY or "
        "ANTHROPIC_BASE_URL in its environment and restart it (`up`'s: stop `dagwright up` "
        "and start it again with the variable set)"
    )
