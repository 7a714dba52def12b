"""Models near or past their end of life: warned about within 30 days, refused after, with
the replacement named, by doctor, run/submit and the worker. The dates are the installed
SDK's; every test fixes the day (``today`` / ``model_lifecycle_date``), so none changes
its verdict when the calendar moves on. claude-sonnet-4-5 (end of life 2026-11-30) is
used here on purpose: it is the deprecated model these tests are about."""

from __future__ import annotations

import datetime as dt
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.errors import LLMRequestError, ModelEndOfLifeWarning, RetiredModelError
from dagwright.llm.anthropic import AnthropicLLM
from dagwright.llm.messages_api_rules import MODEL_REPLACEMENTS
from dagwright.llm.model_lifecycle import (
    check_models,
    end_of_life,
    end_of_life_table,
    parse_sdk_date,
    retired_problem,
    retirement_warning,
)
from dagwright.llm.protocol import LLMRequest
from dagwright.llm.sdk_models import sdk_end_of_life, sdk_model_ids
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from tests.support.cli import cli_env, dagwright, json_out

DEPRECATED = "claude-sonnet-4-5"  # end of life 2026-11-30, replaced by claude-sonnet-5-5
RETIRED = "claude-mythos-preview"  # end of life 2026-06-30: retired whatever the day now
NOV_28, NOV_30 = dt.date(2026, 11, 28), dt.date(2026, 11, 30)


def test_the_end_of_life_dates_are_the_sdks() -> None:
    assert sdk_end_of_life()[DEPRECATED] == "November 30th, 2026"
    assert parse_sdk_date("November 30th, 2026") == NOV_30
    assert parse_sdk_date("January 22nd, 2027") == dt.date(2027, 1, 22)
    assert parse_sdk_date("someday") is None
    for model, words in sdk_end_of_life().items():
        found = end_of_life(model)
        assert found is not None and found.date == parse_sdk_date(words), model


def test_every_end_of_life_names_a_replacement_that_is_current() -> None:
    for family, found in end_of_life_table().items():
        assert found.replacement == MODEL_REPLACEMENTS[family]
        assert found.replacement in sdk_model_ids() and end_of_life(found.replacement) is None


def test_within_30_days_a_warning_naming_the_replacement() -> None:
    assert retirement_warning(DEPRECATED, NOV_28) == (
        "model claude-sonnet-4-5 reaches its end of life on 2026-11-30 (in 2 days); after "
        "that the API refuses it: use claude-sonnet-5-5"
    )
    assert retirement_warning("claude-sonnet-4-5-20250929", dt.date(2026, 10, 31)) is not None
    assert retirement_warning(DEPRECATED, dt.date(2026, 10, 30)) is None  # 31 days before
    assert retirement_warning("claude-sonnet-5-5", NOV_28) is None
    assert retired_problem(DEPRECATED, NOV_28) is None


def test_from_its_end_of_life_day_a_refusal_naming_the_replacement() -> None:
    assert retired_problem(DEPRECATED, NOV_30) == (
        "model claude-sonnet-4-5 was retired on 2026-11-30: the API refuses every call to "
        "it; use claude-sonnet-5-5"
    )
    assert retirement_warning(DEPRECATED, NOV_30) is None
    with pytest.raises(RetiredModelError, match="use claude-mythos-5-2"):
        check_models(["claude-sonnet-5-5", RETIRED], NOV_28)
    assert check_models(["claude-sonnet-5-5", DEPRECATED], NOV_28) == [
        retirement_warning(DEPRECATED, NOV_28)
    ]
    # Retired before the SDK's list was written: the rules table keeps its date.
    assert retired_problem("claude-sonnet-4-20250514", NOV_28) is not None


def test_a_submit_warns_of_a_model_near_its_end_of_life(
    settings: Settings, redis_client: redis.Redis
) -> None:
    near = settings.model_copy(update={"default_model": DEPRECATED, "model_lifecycle_date": NOV_28})
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.")
    with pytest.warns(ModelEndOfLifeWarning, match="use claude-sonnet-5-5"):
        Client(near).submit(plan.build())


def test_a_submit_of_a_retired_model_is_a_typed_error_and_nothing_is_written(
    settings: Settings, redis_client: redis.Redis
) -> None:
    gone = settings.model_copy(update={"default_model": DEPRECATED, "model_lifecycle_date": NOV_30})
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.", model=RETIRED)
    with pytest.raises(RetiredModelError, match="use claude-mythos-5-2"):
        Client(settings).submit(plan.build())
    with pytest.raises(RetiredModelError, match="use claude-sonnet-5-5"):
        Client(gone).submit(goal="Compare two queues.")
    # No run was written. A worker of another test may keep its presence keys and its
    # reconciler's bucket leases (``{b3}``) here, so a run's keys are told by their tag:
    # ``<prefix>{<20-character run id>}:<name>``.
    keys = Client(settings).runtime.keys
    assert redis_client.zcard(keys.run_index) == 0
    run_key = re.compile(re.escape(keys.prefix) + r"\{[0-9a-z]{20}\}:")
    assert not [key for key in redis_client.scan_iter() if run_key.match(key)]


def test_the_worker_refuses_a_retired_model_at_node_time_naming_its_replacement(
    settings: Settings, worker: Any, redis_client: redis.Redis, fake_llm: FakeAnthropicServer
) -> None:
    # Submitted on a day the model still served (so the submit let it through); the
    # worker judges on today's date, when it is retired.
    june = settings.model_copy(update={"model_lifecycle_date": dt.date(2026, 6, 1)})
    plan = PlanBuilder()
    plan.agent("research", "researcher", "Find it.", model=RETIRED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelEndOfLifeWarning)
        state = Client(june).submit(plan.build()).wait(timeout=60)
    node = state.nodes["research"]
    assert state.status == RunStatus.FAILED and node.attempts == 1  # permanent: not retried
    assert node.error is not None and node.error.error_class == "LLMRequestError"
    assert node.error.message.endswith("use claude-mythos-5-2")
    assert fake_llm.requests == []  # never sent


def test_the_llm_client_refuses_before_sending(fake_llm: FakeAnthropicServer) -> None:
    settings = Settings(
        anthropic_api_key="k", anthropic_base_url=fake_llm.base_url, model_lifecycle_date=NOV_30
    )
    request = LLMRequest(model=DEPRECATED, system="s", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(LLMRequestError, match=r"retired on 2026-11-30.*use claude-sonnet-5-5"):
        AnthropicLLM(settings.llm).complete(request)
    assert fake_llm.requests == []


def test_doctor_warns_near_the_end_of_life_and_fails_past_it(tmp_path: Path) -> None:
    base = cli_env(None, tmp_path / "data", ANTHROPIC_API_KEY="sk-test")
    near = {
        **base,
        "DAGWRIGHT_DEFAULT_MODEL": DEPRECATED,
        "DAGWRIGHT_MODEL_LIFECYCLE_DATE": "2026-11-28",
    }
    report = json_out(dagwright("doctor", "--json", env=near))
    [models] = [check for check in report["checks"] if check["name"] == "models"]
    assert models["status"] == "warn" and "use claude-sonnet-5-5" in models["detail"]
    gone = {**near, "DAGWRIGHT_MODEL_LIFECYCLE_DATE": "2026-11-30"}
    result = dagwright("doctor", "--json", env=gone)
    [models] = [check for check in json_out(result)["checks"] if check["name"] == "models"]
    assert models["status"] == "fail" and models["detail"].endswith("use claude-sonnet-5-5")
    assert result.returncode != 0


def test_run_prints_one_warning_line_and_refuses_a_retired_model_with_exit_2(
    settings: Settings, redis_client: redis.Redis, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data", DAGWRIGHT_DEFAULT_MODEL=DEPRECATED)
    near = {**env, "DAGWRIGHT_MODEL_LIFECYCLE_DATE": "2026-11-28"}
    ran = dagwright("run", "Compare two queues.", "--no-wait", env=near)
    assert ran.returncode == 0, ran.stderr
    [line] = [line for line in ran.stderr.splitlines() if "end of life" in line]
    assert line.startswith("warning: model claude-sonnet-4-5 reaches its end of life on 2026-11-30")
    gone = {**env, "DAGWRIGHT_MODEL_LIFECYCLE_DATE": "2026-11-30"}
    refused = dagwright("run", "Compare two queues.", "--no-wait", env=gone)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "error: model claude-sonnet-4-5 was retired on 2026-11-30: the API refuses every "
        "call to it; use claude-sonnet-5-5"
    )
