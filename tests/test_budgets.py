"""Budgets per run and per node: each LLM call whose worst case could pass one is refused
before it is made. The agent loop with a scripted LLM (each dimension, node and run), the
reservation script on a real Valkey, and whole runs on a real worker against the fake API
(the request log shows the refused call never left)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.dlq import Classification
from dagwright.errors import BudgetExceededError, InputError, PlanError
from dagwright.llm.pricing import priced
from dagwright.models import Budget, ErrorInfo, Node, Plan, Usage
from dagwright.orchestrator.control.submission import run_budget
from dagwright.orchestrator.runstate.machine import Claim, LeaseRef
from dagwright.orchestrator.runstate.store import new_run_id
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.goals import requested_budget
from dagwright.plans.validation import PlanLimits, validate_plan
from dagwright.schedules.definition import parse_schedule
from dagwright.settings import ModelPrice, Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.scripted import ScriptedLLM, text, tool_use
from dagwright.workers import builtin_registry
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.budgets import DIMENSIONS, amounts, run_fields, usd, worst_case
from dagwright.workers.tools.policy import ToolPolicy
from tests.support.agents import MemoryServices, agent_context
from tests.support.cli import cli_env, dagwright

SPEC = AgentSpec(
    name="tester",
    description="test agent",
    system_prompt="You test.",
    tools=("read_input",),
    policy=ToolPolicy.allowing("read_input"),
    model="claude-test",
    max_tokens=100,
)
# 1,000 USD per million tokens in and out: a token costs $0.001.
PRICED = Settings(model_prices={"claude-test": ModelPrice(input=1000, output=1000)})

# -- the Budget model and how callers give one -------------------------------------------


def test_a_budget_takes_only_positive_limits_it_knows() -> None:
    assert Budget(max_cost_usd=0.5, max_total_tokens=10).is_set
    assert not Budget().is_set
    for bad in ({"max_cost_usd": 0}, {"max_input_tokens": -1}, {"max_tokens": 5}):
        with pytest.raises(ValidationError):
            Budget.model_validate(bad)


def test_budget_tokens_is_short_for_max_total_tokens() -> None:
    assert requested_budget(None, 500) == Budget(max_total_tokens=500)
    both = requested_budget({"max_cost_usd": 0.5}, 500)
    assert both == Budget(max_total_tokens=500, max_cost_usd=0.5)
    assert requested_budget(None) is None and requested_budget({}) is None
    with pytest.raises(InputError, match=r"budget_tokens and budget\.max_total_tokens differ"):
        requested_budget({"max_total_tokens": 10}, 500)
    with pytest.raises(InputError, match=r"invalid budget: budget\.max_cost_usd"):
        requested_budget({"max_cost_usd": -1})


def test_a_submitted_budget_overrides_the_plans_limit_by_limit() -> None:
    plan = Plan.model_validate(
        {
            "nodes": [{"id": "a", "type": "function", "function": "noop"}],
            "budget": {"max_total_tokens": 1000, "max_cost_usd": 1.0},
        }
    )
    merged = run_budget(plan, Budget(max_cost_usd=0.25))
    assert merged == Budget(max_total_tokens=1000, max_cost_usd=0.25)
    assert run_budget(None, None) is None
    assert run_fields(merged) == {"budget_tokens": "1000", "budget_usd": "0.25"}


def test_a_node_budget_is_for_agent_nodes() -> None:
    plan = Plan.model_validate(
        {
            "nodes": [
                {"id": "a", "type": "function", "function": "noop", "budget": {"max_cost_usd": 1}}
            ]
        }
    )
    with pytest.raises(PlanError, match="a function node does not make"):
        validate_plan(plan, builtin_registry(), PlanLimits())


def test_a_schedule_gives_each_run_its_budget() -> None:
    schedule = parse_schedule(
        {"name": "nightly", "every_s": 60, "goal": "g", "budget": {"max_cost_usd": 0.5}}
    )
    assert schedule.options().budget == Budget(max_cost_usd=0.5)
    older = parse_schedule({"name": "old", "every_s": 60, "goal": "g", "budget_tokens": 900})
    assert older.options().budget == Budget(max_total_tokens=900)


def test_token_budgets_count_cache_reads_and_writes_as_billed() -> None:
    sonnet = ModelPrice(input=2, output=10, cache_read=0.1)  # reads a twentieth of an input
    usage = Usage(
        input_tokens=1_000,
        output_tokens=500,
        cache_read_input_tokens=100_000,
        cache_creation_input_tokens=8_000,
        cache_creation_1h_input_tokens=4_000,
    )
    billed = priced(usage, sonnet)
    # 1,000 fresh + 100,000 x 0.05 + 4,000 x 1.25 + 4,000 x 2
    assert billed.billed_input_tokens == 1_000 + 5_000 + 5_000 + 8_000
    assert {d.name: d.used(billed) for d in DIMENSIONS if d.name != "cost_usd"} == {
        "input_tokens": 19_000,
        "output_tokens": 500,
        "total_tokens": 19_500,
    }
    assert billed.total_tokens == 109_500  # what was read and written, still shown whole
    # a usage never priced (an old checkpoint's) counts every token whole: never less
    assert usage.billed_input_tokens == 109_000


def test_a_calls_worst_case_is_priced_at_the_models_rates() -> None:
    call = worst_case(200, 100, ModelPrice(input=2, output=10))
    assert amounts(call) == {
        "input_tokens": 200,
        "output_tokens": 100,
        "total_tokens": 300,
        "cost_usd": pytest.approx(0.0014),
    }
    assert worst_case(200, 100, None).cost_usd == 0  # an unlisted model costs nothing
    assert [usd(0.04), usd(0.000125), usd(12.5)] == ["$0.04", "$0.000125", "$12.50"]


# -- the agent loop: every dimension, for the node and for the run ---------------------

# Each case: a limit, the first call's usage, and how the refusal names the dimension.
# The first call fits; the second (it reads the first call's tokens again, plus the tool
# result, and may write max_tokens = 100) could not, so it is never made.
DIMENSION_CASES = [
    pytest.param(
        {"max_input_tokens": 500},
        {"input_tokens": 400, "output_tokens": 10},
        "input tokens",
        id="input",
    ),
    pytest.param(
        {"max_output_tokens": 150},
        {"input_tokens": 10, "output_tokens": 60},
        "output tokens",
        id="output",
    ),
    pytest.param(
        {"max_total_tokens": 1000},
        {"input_tokens": 500, "output_tokens": 100},
        "tokens",
        id="total",
    ),
    pytest.param(
        {"max_cost_usd": 0.5},
        {"input_tokens": 100, "output_tokens": 50, "cost_usd": 0.3},
        "$0.50",
        id="usd",
    ),
]


def run_twice(
    tmp_path: Path, usage: dict[str, Any], *, node_budget: Budget | None, run: Budget | None
) -> tuple[ScriptedLLM, MemoryServices, BudgetExceededError]:
    llm = ScriptedLLM([tool_use("read_input", {"node": "x"}, **usage), text("never sent")])
    services = MemoryServices(llm, tmp_path)
    services.run_budget = run
    ctx = agent_context(services, inputs={"x": 1}, settings=PRICED)
    node = Node(id="agent", type="tester", instruction="Do it.", budget=node_budget)
    with pytest.raises(BudgetExceededError) as refused:
        run_agent(ctx, node, SPEC, builtin_registry().tools)
    return llm, services, refused.value


@pytest.mark.parametrize(("limit", "usage", "named"), DIMENSION_CASES)
def test_a_node_budget_refuses_the_call_that_could_pass_it(
    tmp_path: Path, limit: dict[str, Any], usage: dict[str, Any], named: str
) -> None:
    budget = Budget.model_validate(limit)
    llm, services, error = run_twice(tmp_path, usage, node_budget=budget, run=None)
    assert len(llm.requests) == 1  # the second call was refused, not made
    message = str(error)
    assert message.startswith("node 'agent' budget ")
    assert named in message and "the call was not made" in message
    assert f"raise the node's budget.{next(iter(limit))} in the plan" in message
    assert services.checkpoints  # the first call is kept: a replay resumes after it


@pytest.mark.parametrize(("limit", "usage", "named"), DIMENSION_CASES)
def test_a_run_budget_refuses_the_call_that_could_pass_it(
    tmp_path: Path, limit: dict[str, Any], usage: dict[str, Any], named: str
) -> None:
    budget = Budget.model_validate(limit)
    llm, services, error = run_twice(tmp_path, usage, node_budget=None, run=budget)
    assert len(llm.requests) == 1
    message = str(error)
    assert message.startswith("run budget ") and named in message
    [flag] = [d.flag for d in DIMENSIONS if d.limit in limit]
    assert f"raise it with {flag} or the plan's budget.{next(iter(limit))}" in message
    assert len(services.reservations) == 2  # both calls were checked against the run


def test_the_types_token_budget_is_the_default_a_node_budget_replaces(tmp_path: Path) -> None:
    spec = dataclasses.replace(SPEC, token_budget=50)  # less than one call's worst case
    node = Node(id="agent", type="tester", instruction="Do it.")
    with pytest.raises(BudgetExceededError, match="token_budget of 'tester'"):
        run_agent(
            agent_context(MemoryServices(ScriptedLLM([]), tmp_path)),
            node,
            spec,
            builtin_registry().tools,
        )
    roomy = node.model_copy(update={"budget": Budget(max_total_tokens=10_000)})
    llm = ScriptedLLM([text("done")])
    ctx = agent_context(MemoryServices(llm, tmp_path))
    assert run_agent(ctx, roomy, spec, builtin_registry().tools) == "done"


def test_a_resumed_node_counts_what_it_spent_before(tmp_path: Path) -> None:
    """AgentState.usage survives a redelivery: the node budget sees the earlier calls."""
    first = ScriptedLLM([tool_use("read_input", {"node": "x"}, input_tokens=300, output_tokens=0)])
    services = MemoryServices(first, tmp_path, lose_after_writes=1)  # dies after the call
    node = Node(
        id="agent", type="tester", instruction="Do it.", budget=Budget(max_input_tokens=500)
    )
    with pytest.raises(Exception, match="lost"):
        run_agent(agent_context(services, inputs={"x": 1}), node, SPEC, builtin_registry().tools)
    again = ScriptedLLM([text("never sent")])
    ctx = agent_context(
        MemoryServices(again, tmp_path), inputs={"x": 1}, checkpoint=services.checkpoints[-1]
    )
    with pytest.raises(BudgetExceededError, match="300 input tokens spent"):
        run_agent(ctx, node, SPEC, builtin_registry().tools)
    assert again.requests == []


# -- the reservation in Redis (lua/reserve.lua), driven directly -----------------------


@pytest.fixture
def runtime(no_worker_settings: Settings) -> Runtime:
    return Runtime.from_settings(no_worker_settings)


def start_run(runtime: Runtime, budget: Budget | None, *node_ids: str) -> str:
    plan = Plan.model_validate(
        {"nodes": [{"id": n, "type": "function", "function": "noop"} for n in node_ids]}
    )
    run_id = new_run_id()
    graph = validate_plan(plan, builtin_registry(), PlanLimits())
    fields: dict[str, str | int] = {**run_fields(budget)}
    runtime.store.create_run(run_id, graph, runtime.dispatch_for, extra=fields)
    for node_id in node_ids:
        claimed = runtime.machine.claim(run_id, node_id, 1, lease_s=30, holder="h:1")
        assert isinstance(claimed, Claim)
    return run_id


def call_of(tokens: int, cost: float = 0.0) -> dict[str, float]:
    return amounts(worst_case(tokens // 2, tokens - tokens // 2, None)) | {"cost_usd": cost}


def reserved(runtime: Runtime, run_id: str) -> dict[str, str]:
    return dict(runtime.client.hgetall(runtime.keys.run_key(run_id, "reserved")))


def test_a_cached_reread_weighs_on_a_run_budget_at_its_price(runtime: Runtime) -> None:
    run_id = start_run(runtime, Budget(max_input_tokens=50_000), "a", "b")
    scheduler = runtime.machine
    # 100k tokens read from the prompt cache, billed as 10k fresh ones (the published 0.1x)
    read = priced(Usage(cache_read_input_tokens=100_000, llm_calls=1), None)
    assert read.cache_discount_tokens == 90_000
    lease = LeaseRef(run_id, "a", 1)
    assert scheduler.record_progress(lease, lease_s=30, usage_json=read.model_dump_json())
    assert scheduler.reserve_budget(LeaseRef(run_id, "b", 1), call_of(60_000)).refusal is None
    refused = scheduler.reserve_budget(LeaseRef(run_id, "b", 1), call_of(90_000)).refusal
    assert refused is not None and (refused.dimension, refused.spent) == ("input_tokens", 10_000)


def test_a_reservation_holds_the_budget_against_other_nodes(runtime: Runtime) -> None:
    run_id = start_run(runtime, Budget(max_total_tokens=1000), "a", "b")
    scheduler = runtime.machine
    assert scheduler.reserve_budget(LeaseRef(run_id, "a", 1), call_of(600)).refusal is None
    refused = scheduler.reserve_budget(LeaseRef(run_id, "b", 1), call_of(600)).refusal
    assert refused is not None
    assert (refused.dimension, refused.limit, refused.spent, refused.held, refused.projected) == (
        "total_tokens",
        1000,
        0,
        600,
        600,
    )
    assert set(reserved(runtime, run_id)) == {"a"}  # a refused call holds nothing
    # a's call is recorded: its usage (less than its worst case) replaces its reservation
    usage = '{"input_tokens": 200, "output_tokens": 100, "llm_calls": 1}'
    assert scheduler.record_progress(LeaseRef(run_id, "a", 1), lease_s=30, usage_json=usage)
    assert reserved(runtime, run_id) == {}
    assert scheduler.reserve_budget(LeaseRef(run_id, "b", 1), call_of(600)).refusal is None
    # a node asking again replaces its own reservation rather than adding to it
    assert scheduler.reserve_budget(LeaseRef(run_id, "b", 1), call_of(700)).refusal is None


def test_reservations_go_when_their_node_stops_running(runtime: Runtime) -> None:
    run_id = start_run(runtime, Budget(max_cost_usd=1.0), "a", "b", "c")
    scheduler = runtime.machine
    for node in ("a", "b", "c"):
        assert scheduler.reserve_budget(LeaseRef(run_id, node, 1), call_of(10, 0.3)).owned
    assert set(reserved(runtime, run_id)) == {"a", "b", "c"}
    assert scheduler.complete(run_id, "a", 1, "null") is not None
    error = ErrorInfo(error_class="Boom", message="boom", retryable=True)
    assert scheduler.schedule_retry(run_id, "b", 1, error, 0)
    assert set(reserved(runtime, run_id)) == {"c"}
    # c's worker dies: its lease expires and the reconciler takes the node back
    runtime.client.zadd(runtime.keys.run_key(run_id, "leases"), {"c": 0})
    scheduler.reconcile_run(run_id, publish_grace_s=60, stranded_after_s=60)
    assert reserved(runtime, run_id) == {}


def test_a_node_no_longer_ours_reserves_nothing(runtime: Runtime) -> None:
    run_id = start_run(runtime, Budget(max_total_tokens=1000), "a")
    reservation = runtime.machine.reserve_budget(LeaseRef(run_id, "a", 2), call_of(10))
    assert not reservation.owned and reserved(runtime, run_id) == {}


def test_a_run_without_a_budget_holds_nothing(runtime: Runtime) -> None:
    run_id = start_run(runtime, None, "a")
    reservation = runtime.machine.reserve_budget(LeaseRef(run_id, "a", 1), call_of(10**9))
    assert reservation.owned and reservation.refusal is None
    assert reserved(runtime, run_id) == {}


# -- whole runs on a real worker, against the fake Anthropic API -----------------------


def researcher_says(*blocks: dict[str, Any], usage: dict[str, int], **entry: Any) -> dict[str, Any]:
    return {
        "match": {"system_contains": "You are the researcher"},
        "reply": {"content": list(blocks), "usage": usage},
        **entry,
    }


LIST_FILES = {"type": "tool_use", "name": "workspace_list", "input": {}}
DONE = {"type": "text", "text": "done"}


def one_researcher(**budget: Any) -> Plan:
    plan = PlanBuilder(goal="find it")
    plan.agent("research", "researcher", "Find it.")
    built = plan.build()
    return built.model_copy(update={"budget": Budget(**budget)}) if budget else built


def assert_refused_for_budget(client: Client, run_id: str, node: str) -> str:
    """The node failed for good with a budget error, dead-lettered as ``budget``."""
    state = client.status(run_id)
    failed = state.nodes[node]
    assert state.status == RunStatus.FAILED and failed.status == "failed"
    assert failed.error is not None and failed.error.error_class == "BudgetExceededError"
    assert failed.attempts == 1  # permanent: not retried
    [letter] = client.dlq.list(run_id=run_id)
    assert letter.classification == Classification.BUDGET and letter.node_id == node
    assert reserved(client.runtime, run_id) == {}  # nothing left held
    return failed.error.message


@pytest.mark.usefixtures("worker")
def test_a_run_over_its_token_budget_stops_before_the_call_that_would_exceed_it(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        researcher_says(LIST_FILES, usage={"input_tokens": 9000, "output_tokens": 500}),
        researcher_says(DONE, usage={"input_tokens": 10, "output_tokens": 1}),
    )
    # The first call's worst case (~900 in + 16,000 out, the researcher's max_tokens) fits
    # in 25,000; the second reads the 9,500 tokens again and may write 16,000 more:
    # 9,500 spent + ~26,400 > 25,000.
    handle = client.submit(one_researcher(), budget_tokens=25000)
    state = handle.wait(timeout=60)
    assert len(fake_llm.requests) == 1  # the refused call never reached the API
    message = assert_refused_for_budget(client, handle.run_id, "research")
    assert message.startswith("run budget 25,000 tokens: the next LLM call could use ")
    assert "9,500 tokens spent: the call was not made" in message
    assert message.endswith("raise it with --budget-tokens or the plan's budget.max_total_tokens")
    assert state.usage.total_tokens == 9500 <= 25000
    assert state.budget == Budget(max_total_tokens=25000)
    # A replay under the same budget is told it will stop again, and it does, for free.
    [letter] = client.dlq.list(run_id=handle.run_id)
    replayed = client.dlq.replay(letter.id)
    assert replayed.replayed and "its budget is unchanged" in replayed.warning
    assert handle.wait(timeout=60).status == RunStatus.FAILED
    assert len(fake_llm.requests) == 1 and len(client.dlq.list(run_id=handle.run_id)) == 2


@pytest.mark.usefixtures("worker")
def test_a_usd_budget_refuses_the_call_that_could_cost_too_much(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(
        researcher_says(LIST_FILES, usage={"input_tokens": 20000, "output_tokens": 5000}),
        researcher_says(DONE, usage={"input_tokens": 10, "output_tokens": 1}),
    )
    # claude-sonnet-5-5: $2 in, $10 out per MTok. First call: about $0.162 at worst (16,000
    # out), and $0.09 spent; the second could cost about $0.21 more: past $0.25.
    handle = client.submit(one_researcher(max_cost_usd=0.25))  # the plan's own budget
    state = handle.wait(timeout=60)
    assert len(fake_llm.requests) == 1
    message = assert_refused_for_budget(client, handle.run_id, "research")
    assert message.startswith("run budget $0.25: the next LLM call could use $0.21")
    assert "$0.09 spent" in message and "--budget-usd" in message
    assert state.usage.cost_usd == pytest.approx(0.09)


@pytest.mark.usefixtures("worker")
def test_two_nodes_wanting_the_last_of_the_budget_make_one_call(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    # Both first calls fit alone (~16,900 tokens at worst each), not together in 30,000.
    # The answer is slow, so the second node asks while the first call is in flight;
    # its usage (15,100) would leave no room for the second either way.
    fake_llm.add(
        researcher_says(
            DONE, usage={"input_tokens": 15000, "output_tokens": 100}, delay_s=5, times=2
        )
    )
    plan = PlanBuilder(goal="both")
    plan.agent("left", "researcher", "Find the left half.")
    plan.agent("right", "researcher", "Find the right half.")
    handle = client.submit(plan.build(), budget={"max_total_tokens": 30000})
    state = handle.wait(timeout=60)
    assert len(fake_llm.requests) == 1  # one call made; the other refused, never sent
    statuses = sorted(node.status.value for node in state.nodes.values())
    assert statuses == ["failed", "succeeded"] and state.status == RunStatus.FAILED
    [refused] = [n for n, s in state.nodes.items() if s.status == "failed"]
    message = assert_refused_for_budget(client, handle.run_id, refused)
    assert "held by calls in flight" in message  # the reservation refused it
    assert state.usage.total_tokens == 15100


@pytest.mark.usefixtures("worker")
def test_an_input_token_budget_holds_with_nodes_in_parallel(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    # Each researcher's first call sends its system prompt (the type's, then the run's:
    # date and goal), its tool definitions (about half of it) and a message (the
    # instruction): the fake API counts them as the real one does, from all it was sent
    # (about 1,230 tokens), and
    # so does the estimate (count_tokens for the prefix). Estimated without the tools (~265
    # each), three calls fitted in the budget together and spent more; with them, the
    # third is refused and the run stays within its budget.
    fake_llm.add(researcher_says(DONE, usage={"output_tokens": 5}, delay_s=1, times=3))
    plan = PlanBuilder(goal="three ways")
    for side in ("left", "middle", "right"):
        plan.agent(side, "researcher", f"Find the {side} part.")
    handle = client.submit(plan.build(), budget={"max_input_tokens": 2600})
    state = handle.wait(timeout=60)
    assert len(fake_llm.requests) == 2 and state.status == RunStatus.FAILED
    assert 2000 < state.usage.input_tokens <= 2600
    [refused] = [n for n, s in state.nodes.items() if s.status == "failed"]
    message = assert_refused_for_budget(client, handle.run_id, refused)
    assert message.startswith("run budget 2,600 input tokens: the next LLM call could use ")


@pytest.mark.usefixtures("worker")
def test_a_node_budget_in_a_plan_file_fails_only_that_node(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(researcher_says(DONE, usage={"input_tokens": 10, "output_tokens": 1}))
    plan = Plan.model_validate(
        {
            "nodes": [
                {"id": "cheap", "type": "researcher", "instruction": "Find it.",
                 "budget": {"max_output_tokens": 1000}},  # less than max_tokens (4,096)
                {"id": "free", "type": "researcher", "instruction": "Find more."},
            ]
        }
    )  # fmt: skip
    handle = client.submit(plan)
    state = handle.wait(timeout=60)
    assert state.nodes["free"].status == "succeeded" and len(fake_llm.requests) == 1
    message = assert_refused_for_budget(client, handle.run_id, "cheap")
    assert message.startswith("node 'cheap' budget 1,000 output tokens: the next LLM call")
    assert state.budget is None


@pytest.mark.subprocess
def test_cli_run_with_a_tiny_usd_budget_fails_with_one_clear_line(
    settings: Settings,
    redis_client: object,
    worker: object,
    fake_llm: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("nodes:\n  - {id: research, type: researcher, instruction: Find it.}\n")
    env = cli_env(settings, tmp_path / "data")
    result = dagwright("run", str(plan), "--budget-usd", "0.0001", env=env)
    assert result.returncode == 1, result.stderr
    assert fake_llm.requests == []
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "the call was not made" in line]
    assert "run budget $0.0001: the next LLM call could use $0.16" in line
    assert "raise it with --budget-usd" in line
    [state] = Client(settings).list_runs(1)
    status = dagwright("status", state.run_id, env=env)
    assert "budget: $0.00 / $0.0001" in status.stdout, status.stdout + status.stderr


@pytest.mark.subprocess
def test_cli_refuses_a_budget_that_is_not_positive(
    settings: Settings, redis_client: object, tmp_path: Path
) -> None:
    env = cli_env(settings, tmp_path / "data")
    result = dagwright("run", "examples/plans/diamond.yaml", "--budget-usd", "0", env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--budget-usd" in result.stderr and "not above 0" in result.stderr


def test_reservations_are_atomic_under_concurrent_asks(runtime: Runtime) -> None:
    """Many nodes asking at once for the last of the budget: exactly the ones that fit."""
    nodes = [f"n{i}" for i in range(8)]
    run_id = start_run(runtime, Budget(max_total_tokens=3000), *nodes)
    granted: list[str] = []

    def ask(node: str) -> None:
        if runtime.machine.reserve_budget(LeaseRef(run_id, node, 1), call_of(1000)).refusal is None:
            granted.append(node)

    threads = [threading.Thread(target=ask, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(granted) == 3 and set(reserved(runtime, run_id)) == set(granted)
