"""Settings in sections: every flat name users write still reaches its field.

Code reads ``settings.sandbox.memory_mb``; users still write ``DAGWRIGHT_SANDBOX_MEMORY_MB``,
``sandbox_memory_mb`` in dagwright.toml, or ``Settings(sandbox_memory_mb=...)``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import NoDecode

from dagwright import ConfigurationError, Settings
from dagwright.cli.options import settings_from
from dagwright.settings import FLAT_NAMES

# Values a field with no default takes from the environment, by flat name or by type.
SAMPLES = {
    "celery_app": "myproject.celery:app",
    "model_lifecycle_date": "2030-01-02",
    "events_retention_s": "3600",
    "trace_retention_s": "3600",
}
SAMPLE_BY_TYPE: dict[object, str] = {
    str: "sample",
    int: "7",
    float: "7.5",
    bool: "true",
    Path: "/tmp/sample",
    SecretStr: "s3cret",
    dt.date: "2030-01-02",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("DAGWRIGHT_") or name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def env_text(flat: str, field: FieldInfo) -> str:
    """A valid value of the setting, as an environment variable holds it."""
    if flat in SAMPLES:
        return SAMPLES[flat]
    default = field.get_default(call_default_factory=True)
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, list):  # comma-separated where the field says so, else JSON
        return ",".join(default) if NoDecode in field.metadata else json.dumps(default)
    if isinstance(default, dict):
        return json.dumps(default)
    if default is not None:
        return str(default)
    kinds = [arg for arg in typing.get_args(field.annotation) if arg is not type(None)]
    return SAMPLE_BY_TYPE[kinds[0] if kinds else field.annotation]


@pytest.mark.parametrize("flat", sorted(FLAT_NAMES.place))
def test_every_setting_is_read_from_its_unchanged_variable(
    flat: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    section, field = FLAT_NAMES.place[flat]
    monkeypatch.setenv(f"DAGWRIGHT_{flat.upper()}", env_text(flat, Settings.flat_field(flat)))
    read = getattr(Settings(), section)
    assert field in read.model_fields_set, f"DAGWRIGHT_{flat.upper()} did not reach {section}"


def test_flat_keywords_and_section_keywords_reach_the_same_field() -> None:
    assert Settings(sandbox_memory_mb=128).sandbox.memory_mb == 128
    assert Settings(sandbox={"memory_mb": 96}).sandbox.memory_mb == 96
    assert Settings(anthropic_api_key="k").llm.api_key == SecretStr("k")
    # a flat keyword beats the same field of a section given beside it
    both = Settings(sandbox={"memory_mb": 96, "pids": 9}, sandbox_memory_mb=128)
    assert (both.sandbox.memory_mb, both.sandbox.pids) == (128, 9)


def test_the_file_takes_flat_keys_and_section_tables(tmp_path: Path) -> None:
    (tmp_path / "dagwright.toml").write_text(
        'lease_s = 20.0\nkey_prefix = "file:"\n\n[sandbox]\nmemory_mb = 99\n\n'
        "[model_prices.my-model]\ninput = 1.0\noutput = 2.0\n"
    )
    settings = Settings()
    assert (settings.dispatch.lease_s, settings.redis.key_prefix) == (20.0, "file:")
    assert settings.sandbox.memory_mb == 99
    assert settings.llm.model_prices["my-model"].output == 2.0


def test_precedence_holds_field_by_field_whichever_spelling(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "dagwright.toml").write_text(
        "lease_s = 20.0\n\n"
        "[llm]\nmax_attempts = 3\nidle_timeout_s = 9.0\n\n[sandbox]\nmemory_mb = 99\n"
    )
    monkeypatch.setenv("DAGWRIGHT_LLM_MAX_ATTEMPTS", "5")
    monkeypatch.setenv("DAGWRIGHT_LEASE_S", "30")
    assert Settings().dispatch.lease_s == 30.0  # a flat key of the file loses to the env
    settings = Settings(sandbox_pids=8)
    assert (settings.llm.max_attempts, settings.llm.idle_timeout_s) == (5, 9.0)
    assert (settings.sandbox.memory_mb, settings.sandbox.pids) == (99, 8)
    assert settings_from(None, llm_max_attempts=7).llm.max_attempts == 7
    assert settings_from(None, llm_max_attempts=7).sandbox.memory_mb == 99


def test_the_other_names_of_the_api_key_and_endpoint_still_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-sdk-name")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    llm = Settings().llm
    assert llm.api_key == SecretStr("from-sdk-name")
    assert llm.base_url == "http://127.0.0.1:9"
    monkeypatch.setenv("DAGWRIGHT_ANTHROPIC_API_KEY", "ours")
    assert Settings().llm.api_key == SecretStr("ours")


def test_an_unknown_flat_key_is_ignored_as_before_and_an_unknown_section_key_refused(
    tmp_path: Path,
) -> None:
    assert Settings(no_such_setting=1).sandbox.memory_mb == 256
    (tmp_path / "dagwright.toml").write_text("no_such_setting = 1\n")
    assert Settings().dispatch.lease_s == 10.0
    (tmp_path / "dagwright.toml").write_text("[sandbox]\nmemory_gb = 1\n")
    with pytest.raises(ValidationError, match="memory_gb"):
        Settings()


def test_a_wrong_value_is_located_by_the_name_the_user_wrote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(sandbox_memory_mb="lots")
    assert [error["loc"] for error in caught.value.errors()] == [("sandbox_memory_mb",)]
    monkeypatch.setenv("DAGWRIGHT_LLM_PROVIDER", "openai")
    with pytest.raises(ConfigurationError, match="DAGWRIGHT_LLM_PROVIDER: Input should be"):
        settings_from(None)


def test_model_copy_takes_flat_names_and_leaves_the_rest() -> None:
    settings = Settings(sandbox_pids=9)
    copied = settings.model_copy(update={"redis_url": "redis://h/2", "sandbox_memory_mb": 64})
    assert (copied.redis.url, copied.sandbox.memory_mb, copied.sandbox.pids) == (
        "redis://h/2",
        64,
        9,
    )
    assert settings.redis.url is None


def test_secrets_stay_masked_in_every_rendering() -> None:
    settings = Settings(redis_password="pw-123", anthropic_api_key="key-456")
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert "pw-123" not in text and "key-456" not in text


def test_every_flat_name_is_one_field_of_one_section() -> None:
    flat = Settings.flat_fields()
    assert len(flat) == sum(len(section.model_fields) for section in FLAT_NAMES.sections.values())
    assert not set(flat) & set(FLAT_NAMES.sections)


def assert_dump_round_trips(settings: Settings) -> Any:
    return Settings(**settings.model_dump(exclude_unset=True))


def test_a_dump_of_set_values_builds_the_same_settings() -> None:
    settings = Settings(sandbox_memory_mb=128, lease_s=30, imports=["a"])
    again = assert_dump_round_trips(settings)
    assert again == settings
