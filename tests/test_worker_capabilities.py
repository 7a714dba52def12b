"""Workers publish what they can run; a submit refuses a plan no live worker can run
(issue 18), with one line saying what is missing and where to set it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis
from pydantic import SecretStr

from dagwright import Client, PlanBuilder, Settings
from dagwright.errors import UnrunnablePlanError
from dagwright.keys import Keys
from dagwright.orchestrator.control.runnable import NodeNeed, unmet
from dagwright.registry import build_registry
from dagwright.tasks import queues_for
from dagwright.workers.capabilities import WorkerCapabilities, llm_assignment
from tests.support.cli import cli_env, dagwright, one_error_line
from tests.support.processes import Workers
from tests.support.waiting import wait_until

WORDSTATS = "examples.wordstats.functions"
WORDSTATS_PLAN = "examples/wordstats/plan.yaml"


def publish(settings: Settings, hostname: str, *, ttl_s: float = 15.0, **changes: object) -> None:
    """The capabilities entry a worker of ``settings`` publishes (``changes`` to it)."""
    registry = build_registry(settings)
    capabilities = WorkerCapabilities.of(registry, settings, queues_for(None, registry))
    capabilities = capabilities.__class__(**{**capabilities.__dict__, **changes})
    state = redis.Redis.from_url(settings.redis.url or "")
    state.hset(
        Keys().worker_capabilities, hostname, capabilities.to_json(expires_at=time.time() + ttl_s)
    )


def wordstats_plan() -> str:
    return str(Path(__file__).parent.parent / WORDSTATS_PLAN)


def with_wordstats(settings: Settings) -> Settings:
    return settings.model_copy(update={"imports": [*settings.process.imports, WORDSTATS]})


def test_without_any_live_worker_a_submit_is_accepted(no_worker_settings: Settings) -> None:
    run = Client(with_wordstats(no_worker_settings)).submit(wordstats_plan())
    assert run.status().status.value == "running"  # waits in its queues for workers to start


def test_a_function_no_live_worker_registered_is_refused_naming_the_import(
    no_worker_settings: Settings,
) -> None:
    publish(no_worker_settings, "w1@host")
    client = Client(with_wordstats(no_worker_settings))
    with pytest.raises(UnrunnablePlanError) as refused:
        client.submit(wordstats_plan())
    message = str(refused.value)
    assert message == (  # every missing function, in one line
        "functions 'word_stats', 'compare_stats' are not registered in any live worker: "
        f"start the workers with `--import {WORDSTATS}` (`dagwright up -I …`) or set "
        "DAGWRIGHT_IMPORTS in the workers' environment"
    )
    state = redis.Redis.from_url(no_worker_settings.redis.url or "", decode_responses=True)
    assert [key for key in state.keys("*") if key != Keys().worker_capabilities] == []


def test_a_worker_that_imports_the_functions_makes_the_plan_runnable(
    no_worker_settings: Settings,
) -> None:
    publish(no_worker_settings, "w1@host")  # cannot run it
    publish(with_wordstats(no_worker_settings), "w2@host")  # can
    run = Client(with_wordstats(no_worker_settings)).submit(wordstats_plan())
    assert run.run_id


def test_expired_entries_are_not_live_workers(no_worker_settings: Settings) -> None:
    publish(no_worker_settings, "killed@host", ttl_s=-1)  # a kill -9'd worker's last word
    run = Client(with_wordstats(no_worker_settings)).submit(wordstats_plan())
    assert run.run_id


def test_an_agent_plan_on_workers_without_an_llm_endpoint_is_refused(
    no_worker_settings: Settings,
) -> None:
    publish(no_worker_settings, "w1@host", llm="")
    plan = PlanBuilder("ask")
    plan.agent("a", "researcher", "say hi")
    plan.agent("b", "writer", "say it again", depends_on=["a"])
    plan.function("c", "noop", depends_on=["b"])  # runs: the worker has it
    base_url = no_worker_settings.llm.base_url  # the fake's, as `fake-llm` offline
    offline = no_worker_settings.model_copy(update={"anthropic_api_key": None})
    with pytest.raises(UnrunnablePlanError) as refused:
        Client(offline).submit(plan.build())
    assert str(refused.value) == (
        "no live worker serving 'researcher' or 'writer' has an Anthropic API key or "
        "ANTHROPIC_BASE_URL, and workers read ANTHROPIC_BASE_URL only when they start: stop "
        f"`dagwright up` (Ctrl-C) and start it again with `ANTHROPIC_BASE_URL={base_url} "
        "dagwright up` (other workers: set ANTHROPIC_BASE_URL in their environment and "
        "restart them)"
    )


def test_workers_and_a_client_without_an_llm_are_told_to_set_it_here_first(
    no_worker_settings: Settings,
) -> None:
    """The workers of a stack `dagwright run` starts have its environment: the fix is to
    set the variable there and run again."""
    publish(no_worker_settings, "w1@host", llm="")
    plan = PlanBuilder("ask")
    plan.agent("a", "researcher", "say hi")
    bare = no_worker_settings.model_copy(
        update={"anthropic_api_key": None, "anthropic_base_url": None}
    )
    assert llm_assignment(bare.llm) == ""
    with pytest.raises(UnrunnablePlanError) as refused:
        Client(bare).submit(plan.build())
    assert str(refused.value) == (
        "no live worker serving 'researcher' has an Anthropic API key or ANTHROPIC_BASE_URL, "
        "nor has this environment: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL, e.g. to "
        "`dagwright fake-llm`) and run again (workers read it when they start: restart "
        "`dagwright up` or other workers with it)"
    )


def test_the_fix_for_workers_without_an_llm_names_the_key_never_its_value(
    no_worker_settings: Settings,
) -> None:
    publish(no_worker_settings, "w1@host", llm="")
    plan = PlanBuilder("ask")
    plan.agent("a", "researcher", "say hi")
    keyed = no_worker_settings.model_copy(
        update={"anthropic_api_key": SecretStr("sk-ant-secret-123")}
    )
    with pytest.raises(UnrunnablePlanError) as refused:
        Client(keyed).submit(plan.build())
    message = str(refused.value)
    assert "`ANTHROPIC_API_KEY=sk-ant-... ANTHROPIC_BASE_URL=http" in message
    assert "read ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL only when" in message
    assert "secret-123" not in message


def test_a_goal_needs_a_planner_with_an_llm_endpoint(no_worker_settings: Settings) -> None:
    publish(no_worker_settings, "w1@host", llm="")
    with pytest.raises(UnrunnablePlanError, match="'planner' has an Anthropic API key"):
        Client(no_worker_settings).submit(goal="say hi")
    publish(no_worker_settings, "w1@host", worker_types=frozenset({"function"}))
    with pytest.raises(UnrunnablePlanError, match="no live worker serves the planner's queue"):
        Client(no_worker_settings).submit(goal="say hi")


def test_a_type_no_live_worker_serves_names_the_worker_to_start(
    no_worker_settings: Settings,
) -> None:
    publish(no_worker_settings, "w1@host", worker_types=frozenset({"function", "planner"}))
    plan = PlanBuilder("ask")
    plan.agent("a", "researcher", "say hi")
    with pytest.raises(UnrunnablePlanError, match="`dagwright worker -t researcher`"):
        Client(no_worker_settings).submit(plan.build())


def test_capabilities_never_carry_the_api_key(no_worker_settings: Settings) -> None:
    secret = "sk-ant-capabilities-secret"
    settings = no_worker_settings.model_copy(update={"anthropic_api_key": SecretStr(secret)})
    registry = build_registry(settings)
    entry = WorkerCapabilities.of(registry, settings, queues_for(None, registry)).to_json(0)
    assert secret not in entry and settings.llm.base_url not in entry
    assert '"llm": "anthropic api key"' in entry


def test_run_against_live_workers_refuses_a_function_only_the_client_imports(
    subprocess_settings: Settings, workers: Workers, tmp_path: Path
) -> None:
    """Acceptance: `run plan --import M` against workers that do not import M is refused at
    submit (exit 2, one line), not dead-lettered node by node; `doctor` shows why."""
    workers.start(subprocess_settings, concurrency=1)
    state = redis.Redis.from_url(subprocess_settings.redis.url or "", decode_responses=True)
    wait_until(
        lambda: state.hlen(Keys().worker_capabilities), timeout=60, what="the worker's capabilities"
    )
    env = cli_env(subprocess_settings, tmp_path)
    result = dagwright("run", WORDSTATS_PLAN, "--import", WORDSTATS, "--no-wait", env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    line = one_error_line(result)
    assert "functions 'word_stats', 'compare_stats' are not registered in any live" in line
    assert f"`--import {WORDSTATS}` (`dagwright up -I …`)" in line
    assert state.zcard("dw:runs") == 0  # nothing was written

    doctor = dagwright("doctor", env=env)
    assert "functions:" in doctor.stdout and "noop" in doctor.stdout, doctor.stdout
    assert "tests.support.functions" in doctor.stdout


def test_types_missing_everywhere_are_named_with_where_to_get_them() -> None:
    worker = WorkerCapabilities(
        worker_types=frozenset({"function", "planner"}),
        functions=frozenset({"noop"}),
        imports=("tests.support.functions",),
        llm="anthropic api key",
    )
    needs = [NodeNeed("shouter", llm=True), NodeNeed("scout", llm=True)]
    assert unmet(needs, {"w1": worker}, ["tests.support.functions", "mymodule"]) == [
        "worker types 'shouter', 'scout' are not registered in any live worker: start the "
        "workers with `--import mymodule` (`dagwright up -I …`) or set DAGWRIGHT_IMPORTS in "
        "the workers' environment"
    ]
    assert unmet(needs, {"w1": worker}, ["tests.support.functions"]) == [
        "no live worker serves worker types 'shouter', 'scout': start one with "
        "`dagwright worker -t shouter -t scout`"
    ]
    assert unmet(needs, {}, ["mymodule"]) == []  # no live worker: nothing refused
