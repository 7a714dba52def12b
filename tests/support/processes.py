"""Real worker subprocesses for crash tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dagwright.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment of a dagwright process using ``settings`` (nothing inherited)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGWRIGHT_", "ANTHROPIC_"))}
    env.update(
        DAGWRIGHT_REDIS_URL=settings.redis_url or "",
        DAGWRIGHT_BROKER_URL=settings.broker_url or "",
        DAGWRIGHT_LEASE_S=str(settings.lease_s),
        DAGWRIGHT_HEARTBEAT_INTERVAL_S=str(settings.heartbeat_interval_s),
        DAGWRIGHT_RECONCILE_INTERVAL_S=str(settings.reconcile_interval_s),
        DAGWRIGHT_PUBLISH_GRACE_S=str(settings.publish_grace_s),
        DAGWRIGHT_STRANDED_AFTER_S=str(settings.stranded_after_s),
        DAGWRIGHT_DATA_DIR=str(settings.data_dir),
        DAGWRIGHT_IMPORTS="tests.support.functions",
        DAGWRIGHT_LLM_RETRY_BACKOFF_S=str(settings.llm_retry_backoff_s),
    )
    if settings.anthropic_base_url:
        env["ANTHROPIC_BASE_URL"] = settings.anthropic_base_url
    if settings.anthropic_api_key:
        env["ANTHROPIC_API_KEY"] = settings.anthropic_api_key.get_secret_value()
    return env


class WorkerProcess:
    """``dagwright worker`` in its own process group, logging to a file."""

    def __init__(
        self, settings: Settings, log_path: Path, *, concurrency: int = 2, name: str = "w"
    ) -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dagwright",
                "worker",
                "-c",
                str(concurrency),
                "-l",
                "INFO",
                "-n",
                f"{name}.{os.getpid()}@test",
            ],
            cwd=REPO_ROOT,
            env=settings_env(settings),
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
