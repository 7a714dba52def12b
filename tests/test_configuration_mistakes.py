"""Configuration mistakes are one line and exit 2 (issue 18), not "internal error" exit 1
or silently ignored: each tried as a new user makes it, with the real command."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright.settings import Settings
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.processes import REPO_ROOT

DIAMOND = str(REPO_ROOT / "examples" / "plans" / "diamond.yaml")


@pytest.fixture
def http_port() -> Iterator[int]:
    """A real HTTP server: what answers when a Redis URL names the wrong port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("command", [["runs"], ["status", "r1"], ["run", DIAMOND, "--no-wait"]])
def test_a_redis_url_on_a_port_that_is_not_redis(
    http_port: int, tmp_path: Path, command: list[str]
) -> None:
    env = cli_env(None, tmp_path, DAGWRIGHT_REDIS_URL=f"redis://127.0.0.1:{http_port}/0")
    result = dagwright(*command, env=env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert f"127.0.0.1:{http_port}/0 does not answer as Redis" in line
    assert "DAGWRIGHT_REDIS_URL" in line


def test_a_broker_url_on_a_port_that_is_not_redis(
    http_port: int, tmp_path: Path, subprocess_settings: Settings
) -> None:
    """The state store is right, the broker is not: refused at submit with one line (the
    run is written, and goes out once the broker answers), not an exit 0 with a run id
    that never starts."""
    broker = f"redis://127.0.0.1:{http_port}/1"
    env = cli_env(subprocess_settings, tmp_path, DAGWRIGHT_BROKER_URL=broker)
    result = dagwright("run", DIAMOND, "--no-wait", env=env, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert f"127.0.0.1:{http_port}/1 does not answer as Redis" in line
    assert "check the port in DAGWRIGHT_BROKER_URL; run " in line and "is written" in line


def test_a_malformed_dagwright_toml(tmp_path: Path) -> None:
    (tmp_path / "dagwright.toml").write_text("redis_url = \n[settings\n")
    result = dagwright("runs", env=cli_env(None, tmp_path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert line.startswith("dagwright.toml is not valid TOML (")
    assert "DAGWRIGHT_CONFIG_FILE" in line


def test_a_config_file_named_and_missing_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "dagwrigth.toml"  # a typo
    env = cli_env(None, tmp_path, DAGWRIGHT_CONFIG_FILE=str(missing))
    result = dagwright("worker-types", env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert one_error_line(result) == (
        f"DAGWRIGHT_CONFIG_FILE names {missing}, which is not a file: fix the path, or unset "
        "it to read ./dagwright.toml"
    )


def test_a_named_config_file_is_read_and_dev_null_names_none(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text('default_model = "claude-from-the-file"\n')
    env = cli_env(None, tmp_path, DAGWRIGHT_CONFIG_FILE=str(config))
    assert "claude-from-the-file" in dagwright("worker-types", env=env).stdout
    env = cli_env(None, tmp_path, DAGWRIGHT_CONFIG_FILE="/dev/null")
    assert dagwright("worker-types", env=env).returncode == 0


def test_plan_without_an_llm_endpoint_is_a_configuration_mistake(tmp_path: Path) -> None:
    result = dagwright("plan", "count the words of a text", env=cli_env(None, tmp_path))
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert "set ANTHROPIC_API_KEY" in line and "ANTHROPIC_BASE_URL" in line
