"""Settings: flag > environment > config file > default, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dagwright import ConfigurationError, Settings
from dagwright.cli.options import settings_from
from dagwright.settings import HttpToolSettings, LLMSettings, SandboxSettings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(__import__("os").environ):
        if name.startswith("DAGWRIGHT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_precedence_flag_then_env_then_file_then_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "dagwright.toml").write_text(
        'max_nodes = 50\nlease_s = 20.0\nkey_prefix = "file:"\n'
    )
    monkeypatch.setenv("DAGWRIGHT_LEASE_S", "30")
    settings = settings_from(["extra.module"], max_nodes=None)
    assert settings.redis.key_prefix == "file:"
    assert settings.limits.max_nodes == 50
    assert settings.dispatch.lease_s == 30.0
    assert settings.process.imports == ["extra.module"]
    assert Settings(lease_s=40).dispatch.lease_s == 40


def test_imports_from_the_environment_are_comma_separated_or_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DAGWRIGHT_IMPORTS", "a.b, c")
    assert Settings().process.imports == ["a.b", "c"]
    assert settings_from(["d"]).process.imports == ["a.b", "c", "d"]
    monkeypatch.setenv("DAGWRIGHT_IMPORTS", '["x"]')
    assert Settings().process.imports == ["x"]


def test_the_broker_defaults_to_the_state_store() -> None:
    assert Settings(redis_url="redis://h/1").redis.effective_broker_url == "redis://h/1"
    assert (
        Settings(redis_url="redis://h/1", broker_url="amqp://b").redis.effective_broker_url
        == "amqp://b"
    )


def test_the_visibility_timeout_is_above_any_node_time_limit() -> None:
    settings = Settings(max_timeout_s=100)
    assert settings.visibility_timeout_s > settings.limits.max_timeout_s + 30


def test_bad_values_are_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGWRIGHT_LEASE_S", "soon")
    with pytest.raises(
        ConfigurationError, match="DAGWRIGHT_LEASE_S: Input should be a valid number"
    ):
        settings_from(None)
    monkeypatch.setenv("DAGWRIGHT_LEASE_S", "1")
    with pytest.raises(ConfigurationError, match=r"heartbeat_interval_s .* must be below lease_s"):
        settings_from(None)


def test_the_groups_code_reads_are_sections_of_settings() -> None:
    settings = Settings(
        sandbox_uid=1234,
        sandbox_memory_mb=512,
        http_allowed_domains=["example.com"],
        llm_idle_timeout_s=7.0,
        anthropic_base_url="http://127.0.0.1:1",
    )
    assert isinstance(settings.sandbox, SandboxSettings)
    assert (settings.sandbox.uid, settings.sandbox.memory_mb) == (1234, 512)
    assert settings.sandbox.packages_dir == settings.process.data_dir / "sandbox-packages"
    assert isinstance(settings.http_tool, HttpToolSettings)
    assert settings.http_tool.allowed_domains == ["example.com"]
    assert isinstance(settings.llm, LLMSettings)
    assert (settings.llm.idle_timeout_s, settings.llm.base_url) == (7.0, "http://127.0.0.1:1")
    with pytest.raises(ValidationError, match="frozen"):
        settings.sandbox.uid = 1  # type: ignore[misc]
