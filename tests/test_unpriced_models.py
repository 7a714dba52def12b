"""A model missing from the price table: its use is "unknown", never $0, in status and the
client; and a USD budget on a run that would call it is refused at submit."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright import Client, PlanBuilder
from dagwright.errors import BudgetExceededError, UnpricedModelError
from dagwright.llm.pricing import priced
from dagwright.models import Budget, Node, Plan, Usage
from dagwright.orchestrator.execution.services import RedisNodeServices
from dagwright.orchestrator.runstate.machine import Claim, LeaseRef
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.settings import Settings
from dagwright.testing.scripted import ScriptedLLM, text
from dagwright.workers import NodeContext, builtin_registry
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.budgets import run_fields
from tests.support.agents import MemoryServices, agent_context
from tests.support.cli import cli_env, dagwright

UNPRICED = "claude-unpriced-9"


def researcher_plan() -> Plan:
    plan = PlanBuilder(goal="find it")
    plan.agent("research", "researcher", "Find it.")
    return plan.build()


def test_a_usd_budget_on_an_unpriced_model_is_refused_at_submit(
    no_worker_settings: Settings,
) -> None:
    client = Client(no_worker_settings.model_copy(update={"default_model": UNPRICED}))
    with pytest.raises(UnpricedModelError) as refused:
        client.submit(researcher_plan(), budget={"max_cost_usd": 1.0})
    message = str(refused.value)
    assert UNPRICED in message and "researcher" in message and "model_prices" in message
    assert client.list_runs(10) == []  # nothing was written
    # Tokens can still be budgeted, and a priced model takes a USD budget.
    assert client.submit(researcher_plan(), budget={"max_total_tokens": 1000})
    assert Client(no_worker_settings).submit(researcher_plan(), budget={"max_cost_usd": 1.0})


def test_a_goal_with_a_usd_budget_checks_the_planners_model(no_worker_settings: Settings) -> None:
    client = Client(no_worker_settings.model_copy(update={"planner_model": UNPRICED}))
    with pytest.raises(UnpricedModelError, match="used by planner"):
        client.submit(goal="find it", budget={"max_cost_usd": 1.0})


@pytest.mark.subprocess
def test_cli_refuses_a_usd_budget_on_an_unpriced_model_in_one_line(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("nodes:\n  - {id: research, type: researcher, instruction: Find it.}\n")
    env = cli_env(no_worker_settings, tmp_path / "data", DAGWRIGHT_DEFAULT_MODEL=UNPRICED)
    result = dagwright("run", str(plan), "--budget-usd", "1", env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert UNPRICED in line and "model_prices" in line


def run_with_usage(runtime: Runtime, *calls: Usage) -> str:
    """A run of one node that recorded ``calls`` (through progress.lua, as a worker does)."""
    plan = Plan.model_validate({"nodes": [{"id": "a", "type": "function", "function": "noop"}]})
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    runtime.store.create_run(run_id, graph, runtime.dispatch_for)
    claim = runtime.machine.claim(run_id, "a", 1, lease_s=30, holder="h:1")
    assert isinstance(claim, Claim)
    for call in calls:
        lease = LeaseRef(run_id, "a", 1)
        assert runtime.machine.record_progress(lease, lease_s=30, usage_json=call.model_dump_json())
    return run_id


@pytest.mark.subprocess
def test_unpriced_use_is_unknown_in_status_and_the_client_never_zero(
    no_worker_settings: Settings, tmp_path: Path
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    unpriced_call = priced(Usage(input_tokens=700, output_tokens=50, llm_calls=1), None)
    run_id = run_with_usage(runtime, unpriced_call)
    state = Client(no_worker_settings).status(run_id)
    assert state.usage.unpriced_tokens == 750 and state.usage.known_cost_usd is None
    env = cli_env(no_worker_settings, tmp_path / "data")
    status = dagwright("status", run_id, env=env)
    assert status.returncode == 0, status.stderr
    assert "750 tokens · unknown" in status.stdout, status.stdout
    assert "$0.0000" not in status.stdout
    as_json = dagwright("status", run_id, "--json", env=env)
    assert '"cost_usd": null' in as_json.stdout and '"unpriced_tokens": 750' in as_json.stdout


def test_partly_priced_use_is_a_lower_bound(no_worker_settings: Settings) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    priced_call = Usage(input_tokens=100, cost_usd=0.25, llm_calls=1)
    unpriced_call = priced(Usage(input_tokens=10, llm_calls=1), None)
    run_id = run_with_usage(runtime, priced_call, unpriced_call)
    usage = Client(no_worker_settings).status(run_id).usage
    assert usage.cost_usd == pytest.approx(0.25) and usage.unpriced_tokens == 10
    assert usage.known_cost_usd is None


# -- at call time: a worker whose price table lacks the model (prices differ by process) --

SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    model=UNPRICED,
    max_tokens=100,
)


@pytest.mark.parametrize("whose", ["node", "run"])
def test_an_unpriced_call_under_a_usd_budget_is_not_made(tmp_path: Path, whose: str) -> None:
    llm = ScriptedLLM([text("never sent")])
    services = MemoryServices(llm, tmp_path)
    budget = Budget(max_cost_usd=1.0)
    services.run_budget = budget if whose == "run" else None
    node = Node(
        id="agent", type="tester", instruction="Do it.", budget=budget if whose == "node" else None
    )
    with pytest.raises(BudgetExceededError, match="missing from model_prices") as refused:
        run_agent(agent_context(services), node, SPEC, builtin_registry().tools)
    assert llm.requests == [] and "cost unknown: the call was not made" in str(refused.value)


def test_the_workers_reservation_refuses_an_unpriced_call_under_a_usd_budget(
    no_worker_settings: Settings,
) -> None:
    runtime = Runtime.from_settings(no_worker_settings)
    services = RedisNodeServices(runtime)
    unknown = priced(Usage(input_tokens=10, output_tokens=10), None)
    for budget, refused in ((Budget(max_cost_usd=1.0), True), (Budget(max_total_tokens=99), False)):
        run_id = new_run_id()
        plan = Plan.model_validate({"nodes": [{"id": "a", "type": "function", "function": "noop"}]})
        graph = validate_plan(plan, builtin_registry(), PlanLimits())
        runtime.store.create_run(run_id, graph, runtime.dispatch_for, extra={**run_fields(budget)})
        assert isinstance(runtime.machine.claim(run_id, "a", 1, lease_s=30, holder="h:1"), Claim)
        ctx = NodeContext(
            run_id=run_id, node_id="a", attempt=1, fence=1, settings=no_worker_settings,
            inputs={}, services=services,
        )  # fmt: skip
        overrun = services.reserve_llm_call(ctx, unknown)
        assert (overrun is not None and overrun.unpriced) == refused


def test_traces_and_metrics_count_unpriced_tokens_apart() -> None:
    from dagwright.cli.traceviews import span_cost
    from dagwright.telemetry.counters import LLM_UNPRICED_TOKENS, llm_usage

    assert span_cost({"cost_usd": 0.0, "unpriced_tokens": 5}) == "unknown"
    assert span_cost({"cost_usd": 0.5, "unpriced_tokens": 5}) == "≥ $0.5000 + unpriced"
    assert span_cost({"cost_usd": 0.5}) == "$0.5000"
    call = priced(Usage(input_tokens=7, llm_calls=1), None)
    [unpriced] = [i for i in llm_usage(UNPRICED, call) if i.family == LLM_UNPRICED_TOKENS]
    assert unpriced.labels == (UNPRICED,) and unpriced.amount == 7
