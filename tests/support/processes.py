"""Real worker subprocesses for crash tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from pydantic import SecretStr

from dagwright.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]

# The timings and limits tests shorten, passed on to the worker processes.
PASSED_SETTINGS = (
    "checkpoint_retention_s",  # the suite keeps a succeeded run's (support/settings.py)
    "lease_s",
    "worker_wait_grace_s",
    "heartbeat_interval_s",
    "reconcile_interval_s",
    "publish_grace_s",
    "stranded_after_s",
    "priority_aging_s",
    "llm_retry_backoff_s",
    "llm_retry_after_cap_s",
    "llm_max_attempts",
    "breaker_fail_max",
    "breaker_reset_timeout_s",
    "breaker_max_probes",
    "breaker_max_wait_s",
    "llm_idle_timeout_s",
    "llm_connect_timeout_s",
    "max_deliveries",
    "worker_loss_backoff_s",
    "worker_loss_backoff_max_s",
    "max_worker_losses",
    "beat_interval_s",
    "beat_lock_timeout_s",
    "llm_rate_window_s",
    "llm_rate_max_wait_s",
    "sandbox_backend",
    "sandbox_python",
    "web_search",
    "web_fetch",
    "webhook_timeout_s",
    "teardown_timeout_s",
    "webhook_max_attempts",
    "webhook_backoff_s",
    "webhook_backoff_max_s",
    "webhook_max_age_s",
    "llm_batch_poll_s",
    "llm_batch_max_wait_s",
    "rate_limit_max_wait_s",
    "max_start_delay_s",
    "concurrency_key_max_wait_s",
    "celery_task_poll_s",
)
# How to reach Redis beyond its URL (TLS files, ACL user), passed when set.
PASSED_REDIS_ACCESS_SETTINGS = (
    "redis_username",
    "redis_password",
    "redis_tls_ca_file",
    "redis_tls_cert_file",
    "redis_tls_key_file",
    "redis_tls_cert_reqs",
    "redis_tls_check_hostname",
    "redis_sentinel_password",
)
# Passed only when set (unset is their default).
PASSED_WHEN_SET_SETTINGS = ("otlp_endpoint", "celery_app")
# Passed as JSON.
PASSED_JSON_SETTINGS = (
    "concurrency_limits",
    "rate_limits",
    "llm_rate_limits",
    "mcp_servers",
    "agent_mcp",
    "agent_memory",
    "web_search_allowed_domains",
    "llm_batch_types",
    "egress_allow",  # the loopback receivers of webhook tests, allow-listed
    "skill_dirs",
    "agent_skills",
)


HOOK_SECRETS = "DAGWRIGHT_WEBHOOK_SECRET_"  # models.Webhook.secret_env


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment of a dagwright process using ``settings``: no setting inherited,
    only the webhooks' own signing keys (not settings: a test sets them for its workers)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_")) or k.startswith(HOOK_SECRETS)
    }
    env.update(
        DAGWRIGHT_REDIS_URL=settings.redis.url or "",
        DAGWRIGHT_BROKER_URL=settings.redis.broker_url or "",
        DAGWRIGHT_DATA_DIR=str(settings.process.data_dir),
        DAGWRIGHT_IMPORTS="tests.support.functions",
    )
    for name in PASSED_SETTINGS:
        env[f"DAGWRIGHT_{name.upper()}"] = str(settings.flat_value(name))
    as_json = settings.flat_dump(mode="json")
    for name, value in ((name, as_json[name]) for name in PASSED_JSON_SETTINGS):
        env[f"DAGWRIGHT_{name.upper()}"] = json.dumps(value)
    for name in PASSED_REDIS_ACCESS_SETTINGS:
        value = settings.flat_value(name)
        if value is not None:
            shown = value.get_secret_value() if isinstance(value, SecretStr) else value
            env[f"DAGWRIGHT_{name.upper()}"] = str(shown)
    env.update(when_set_env(settings))
    if settings.telemetry.metrics_port is not None:
        env["DAGWRIGHT_METRICS_PORT"] = str(settings.telemetry.metrics_port)
        env["DAGWRIGHT_METRICS_HOST"] = settings.telemetry.metrics_host
    if settings.webhooks.secret:
        env["DAGWRIGHT_WEBHOOK_SECRET"] = settings.webhooks.secret.get_secret_value()
    if settings.llm.base_url:
        env["ANTHROPIC_BASE_URL"] = settings.llm.base_url
    if settings.llm.api_key:
        env["ANTHROPIC_API_KEY"] = settings.llm.api_key.get_secret_value()
    return env


def when_set_env(settings: Settings) -> dict[str, str]:
    """The variables of the ``PASSED_WHEN_SET_SETTINGS`` that ``settings`` sets."""
    values = {name: settings.flat_value(name) for name in PASSED_WHEN_SET_SETTINGS}
    return {f"DAGWRIGHT_{name.upper()}": str(value) for name, value in values.items() if value}


class GroupProcess:
    """A process in its own process group, logging to a file: stopped (or killed) with
    every child it started."""

    def __init__(self, command: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill_all(self) -> None:
        """SIGKILL the main process and every pool child at once."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill_all()
        self._log.close()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


class WorkerProcess(GroupProcess):
    """``dagwright worker`` in its own process group, logging to a file."""

    def __init__(
        self,
        settings: Settings,
        log_path: Path,
        *,
        concurrency: int = 2,
        name: str = "w",
        command: list[str] | None = None,
        pool: str = "prefork",
        args: tuple[str, ...] = (),
    ) -> None:
        args = command or [
            "worker",
            *("-c", str(concurrency), "-l", "INFO", "-n", f"{name}.{os.getpid()}@test"),
            *("--pool", pool),
            *args,
        ]
        super().__init__(
            [sys.executable, "-m", "dagwright", *args], log_path, settings_env(settings)
        )


class Workers(list[WorkerProcess]):
    """The worker processes a test started, all stopped at its end."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__()
        self.log_dir = log_dir

    def start(
        self,
        settings: Settings,
        *,
        concurrency: int = 2,
        pool: str = "prefork",
        args: tuple[str, ...] = (),
    ) -> WorkerProcess:
        """``dagwright worker``; ``args``: more of its options (``-t function:gpu``...)."""
        name = f"w{len(self)}"
        worker = WorkerProcess(
            settings,
            self.log_dir / f"{name}.log",
            concurrency=concurrency,
            name=name,
            pool=pool,
            args=args,
        )
        self.append(worker)
        return worker

    def start_beat(self, settings: Settings) -> WorkerProcess:
        """``dagwright beat``: fires the schedules while it holds the beat lock."""
        name = f"beat{len(self)}"
        beat = WorkerProcess(settings, self.log_dir / f"{name}.log", command=["beat", "-l", "INFO"])
        self.append(beat)
        return beat

    def stop_all(self) -> None:
        for worker in self:
            worker.stop()

    def log_tails(self, lines: int = 20) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log_tail(lines)}" for w in self)

    def alive(self) -> list[WorkerProcess]:
        return [worker for worker in self if worker.process.poll() is None]
