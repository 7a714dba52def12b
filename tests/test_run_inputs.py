"""Run inputs: a plan's ``inputs:`` schema, the values a run is given (client, CLI,
schedule, goal), their checks before anything is written, and ``{{ inputs.… }}`` in
params and instructions. Real Valkey, a real worker, the real CLI in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis

from dagwright import Client, PlanBuilder, RunStatus
from dagwright.errors import IdempotencyConflictError, PlanError, RunInputError
from dagwright.models import Plan
from dagwright.plans.files import load_plan, parse_plan
from dagwright.plans.run_inputs import bind_inputs, parse_input_pairs
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.testing.fake_anthropic_script import text_of
from tests.support.cli import cli_env, dagwright, json_out
from tests.support.llm_script import PLANNER, text, turn

GREETING = "examples/plans/greeting_inputs.yaml"
WRITER = "You are the writer"
# What the session's live worker writes on its own, at any moment, in the state database.
WORKER_RECORDS = ("dw:workers:", "dw:worker-capabilities", "dw:reconciler")


def greeting_plan() -> Plan:
    """The example plan, plus a node reading the run's inputs as a function parameter."""
    plan = load_plan(GREETING)
    reader = {"id": "seen", "type": "function", "function": "run_inputs_of"}
    data = plan.model_dump(mode="json", exclude_defaults=True)
    return parse_plan(
        {**data, "output": ["greet", "card", "seen"], "nodes": [*data["nodes"], reader]}
    )


def written_keys(redis_client: redis.Redis) -> list[str]:
    return [key for key in redis_client.scan_iter() if not key.startswith(WORKER_RECORDS)]


# -- pure: the schema, the values, the template ------------------------------------


SCHEMA = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "default": 2},
        "topic": {"type": "string"},
        "opts": {"type": "object"},
    },
    "required": ["topic"],
}


def plan_of(*nodes: dict[str, Any], inputs: dict[str, Any] | None = SCHEMA) -> Plan:
    return parse_plan(
        {"inputs": inputs, "nodes": list(nodes)} if inputs else {"nodes": list(nodes)}
    )


def test_each_problem_of_the_inputs_is_one_line() -> None:
    plan = plan_of({"id": "a", "type": "function", "function": "noop"})
    with pytest.raises(RunInputError) as refused:
        bind_inputs(plan, {"n": "abc", "nmae": 1}, 10_000)
    assert refused.value.problems == [
        "input 'topic' is required",
        "input 'nmae' is not an input of this plan (it takes n, topic, opts)",
        "input 'n': 'abc' is not of type 'integer'",
    ]
    with pytest.raises(RunInputError) as undeclared:
        bind_inputs(plan_of({"id": "a", "type": "noop"}, inputs=None), {"x": 1}, 10_000)
    assert undeclared.value.problems == [
        "input 'x' is not an input of this plan (it declares no inputs)"
    ]


def test_a_schema_may_let_undeclared_inputs_in() -> None:
    schema = {**SCHEMA, "additionalProperties": True}
    bound = bind_inputs(
        plan_of({"id": "a", "type": "noop"}, inputs=schema), {"topic": "t", "x": 1}, 10_000
    )
    assert bound.inputs == {"topic": "t", "x": 1, "n": 2}


def test_templates_keep_json_types_alone_and_are_text_inside_text() -> None:
    plan = plan_of(
        {
            "id": "a",
            "type": "function",
            "function": "concat",
            "params": {
                "parts": ["{{ inputs.topic }}", "n={{inputs.n}}", "{{ inputs.n }}"],
                "deep": {"k": "{{ inputs.opts.k }}", "all": "{{ inputs.opts }}"},
            },
        },
        {
            "id": "b",
            "type": "writer",
            "instruction": "Write {{ inputs.n }} lines on {{ inputs.opts }}.",
        },
    )
    bound = bind_inputs(plan, {"topic": "cats", "opts": {"k": [1, 2]}}, 10_000)
    a, b = bound.plan.nodes
    assert a.params == {
        "parts": ["cats", "n=2", 2],
        "deep": {"k": [1, 2], "all": {"k": [1, 2]}},
    }
    assert b.instruction == 'Write 2 lines on {"k": [1, 2]}.'
    assert bound.inputs == {"topic": "cats", "opts": {"k": [1, 2]}, "n": 2}


def test_a_template_is_a_path_of_names_and_names_a_declared_input() -> None:
    plan = plan_of(
        {
            "id": "a",
            "type": "writer",
            "instruction": "{{ inputs.topic | upper }} {{ inputs.nope }}",
        },
        {"id": "b", "type": "function", "function": "noop", "params": {"x": "{{ inputs['n'] }}"}},
    )
    with pytest.raises(PlanError) as refused:
        bind_inputs(plan, {"topic": "t"}, 10_000)
    assert not isinstance(refused.value, RunInputError)
    assert refused.value.problems == [
        "node 'a' instruction: '{{ inputs.topic | upper }}' is not a template this takes: only "
        "{{ inputs.<name> }} or {{ inputs.<name>.<key> }} (no filters, no code)",
        "node 'a' instruction: {{ inputs.nope }} names no input of the plan (it declares n, "
        "topic, opts)",
        "node 'b' params: \"{{ inputs['n'] }}\" is not a template this takes: only "
        "{{ inputs.<name> }} or {{ inputs.<name>.<key> }} (no filters, no code)",
    ]
    # Other braces are text: a plan may hold Jinja or Mustache meant for something else.
    other = plan_of(
        {"id": "a", "type": "writer", "instruction": "Fill {{ name }} in."}, inputs=None
    )
    assert bind_inputs(other, None, 10_000).plan == other


def test_a_value_the_run_lacks_is_an_input_problem() -> None:
    plan = plan_of({"id": "a", "type": "writer", "instruction": "Use {{ inputs.opts.k }}."})
    with pytest.raises(RunInputError) as refused:
        bind_inputs(plan, {"topic": "t", "opts": {}}, 10_000)
    assert refused.value.problems == [
        "node 'a' uses {{ inputs.opts.k }}, and the run's inputs have no key 'k' (give it, or "
        "a default in `inputs:`)"
    ]


def test_a_schema_that_is_not_an_object_schema_is_a_plan_problem() -> None:
    with pytest.raises(PlanError) as refused:
        bind_inputs(plan_of({"id": "a", "type": "noop"}, inputs={"type": "string"}), None, 1000)
    assert refused.value.problems == [
        "inputs: the schema must say `type: object` (with `properties:`)"
    ]
    broken = {"type": "object", "properties": {"n": {"type": "integr"}}}
    with pytest.raises(PlanError, match=r"inputs\.properties\.n\.type: not a valid JSON Schema"):
        bind_inputs(plan_of({"id": "a", "type": "noop"}, inputs=broken), None, 1000)


def test_cli_values_are_json_where_it_parses_and_text_for_string_inputs() -> None:
    assert parse_input_pairs(
        ["n=5", "topic=123", 'opts={"k": 1}', "x=NaN", "y=hello world", "z="], SCHEMA
    ) == {"n": 5, "topic": "123", "opts": {"k": 1}, "x": "NaN", "y": "hello world", "z": ""}


def test_inputs_are_bounded_like_params() -> None:
    plan = plan_of({"id": "a", "type": "noop"})
    with pytest.raises(RunInputError, match=r"the limit is 100 \(DAGWRIGHT_MAX_PARAMS_BYTES\)"):
        bind_inputs(plan, {"topic": "x" * 200}, 100)


def test_the_builder_declares_inputs() -> None:
    builder = PlanBuilder("Greet")
    builder.input("name", "string", required=True)
    builder.input("times", "integer", default=1)
    builder.function("greet", "concat", params={"parts": ["hi", "{{ inputs.name }}"]})
    plan = builder.build()
    assert plan.inputs == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["name"],
    }
    assert bind_inputs(plan, {"name": "Ada"}, 1000).plan.nodes[0].params == {"parts": ["hi", "Ada"]}


# -- on real workers --------------------------------------------------------------


@pytest.mark.usefixtures("worker")
def test_a_plan_with_inputs_runs_from_the_client(client: Client, redis_client: redis.Redis) -> None:
    run = client.submit(greeting_plan(), inputs={"name": "Ada", "times": 3})
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == {
        "greet": "hello Ada",
        "card": {"to": "Ada", "times": 3},
        "seen": {"name": "Ada", "times": 3, "greeting": "hello"},
    }
    assert state.inputs == {"name": "Ada", "times": 3, "greeting": "hello"}
    # The stored specs hold the values: what ran is what is shown.
    specs = redis_client.hgetall(client.runtime.keys.run_key(run.run_id, "spec"))
    assert json.loads(specs["greet"])["params"] == {"parts": ["hello", "Ada"]}
    assert "{{" not in json.dumps(specs)


@pytest.mark.usefixtures("worker")
def test_defaults_fill_in_what_is_not_given(client: Client) -> None:
    state = client.submit(greeting_plan(), inputs={"name": "Bo"}).wait(timeout=30)
    assert state.result["card"] == {"to": "Bo", "times": 1}
    assert state.result["seen"] == {"name": "Bo", "greeting": "hello", "times": 1}


def test_bad_inputs_are_refused_before_anything_is_written(
    client: Client, redis_client: redis.Redis
) -> None:
    with pytest.raises(RunInputError) as refused:
        client.submit(greeting_plan(), inputs={"times": 0, "nmae": "Ada"})
    assert refused.value.problems == [
        "input 'name' is required",
        "input 'nmae' is not an input of this plan (it takes name, greeting, times)",
        "input 'times': 0 is less than the minimum of 1",
    ]
    unknown = plan_of(
        {"id": "a", "type": "writer", "instruction": "{{ inputs.nope }}"}, inputs=None
    )
    with pytest.raises(PlanError, match="names no input of the plan"):
        client.submit(unknown)
    assert written_keys(redis_client) == []


@pytest.mark.usefixtures("worker")
def test_the_same_key_with_other_inputs_is_another_request(client: Client) -> None:
    first = client.submit(greeting_plan(), inputs={"name": "Ada"}, idempotency_key="greet-1")
    again = client.submit(greeting_plan(), inputs={"name": "Ada"}, idempotency_key="greet-1")
    assert again.run_id == first.run_id
    # The defaults are part of the request: naming one changes nothing.
    same = client.submit(
        greeting_plan(), inputs={"name": "Ada", "times": 1}, idempotency_key="greet-1"
    )
    assert same.run_id == first.run_id
    with pytest.raises(IdempotencyConflictError):
        client.submit(greeting_plan(), inputs={"name": "Bo"}, idempotency_key="greet-1")


@pytest.fixture
def env(settings: Settings, redis_client: object, worker: object, tmp_path: Path) -> dict[str, str]:
    return cli_env(settings, tmp_path / "data", DAGWRIGHT_IMPORTS="tests.support.functions")


@pytest.mark.subprocess
def test_a_plan_with_inputs_runs_from_the_cli(env: dict[str, str], tmp_path: Path) -> None:
    inputs_file = tmp_path / "inputs.yaml"
    inputs_file.write_text("name: Ada\ngreeting: hi\ntimes: 5\n")
    result = dagwright(
        "run", GREETING, "--inputs", str(inputs_file), "--input", "times=2", "--json", env=env
    )
    assert result.returncode == 0, result.stderr
    out = json_out(result)
    assert out["result"] == {"greet": "hi Ada", "card": {"to": "Ada", "times": 2}}
    assert out["inputs"] == {"name": "Ada", "greeting": "hi", "times": 2}

    # A string input keeps its text: `--input name=007` is "007", not 7.
    result = dagwright("run", GREETING, "--input", "name=007", "--json", env=env)
    assert json_out(result)["result"]["greet"] == "hello 007", result.stderr

    shown = dagwright("status", out["run_id"], env=env)
    assert 'inputs: greeting="hi", name="Ada", times=2' in shown.stdout, shown.stdout
    assert (
        json_out(dagwright("status", out["run_id"], "--json", env=env))["inputs"] == out["inputs"]
    )


@pytest.mark.subprocess
def test_bad_cli_inputs_exit_2_with_one_line_each_and_write_nothing(
    env: dict[str, str], redis_client: redis.Redis
) -> None:
    result = dagwright("run", GREETING, "--input", "times=abc", "--input", "nmae=Ada", env=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"error: {GREETING}: 3 problems:",
        "  - input 'name' is required",
        "  - input 'nmae' is not an input of this plan (it takes name, greeting, times)",
        "  - input 'times': 'abc' is not of type 'integer'",
    ]
    missing = dagwright("run", GREETING, "--inputs", "no-such.json", env=env)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "error: no such inputs file: no-such.json"
    assert written_keys(redis_client) == []


@pytest.mark.usefixtures("worker")
def test_a_schedule_passes_its_inputs_to_each_run(
    client: Client, redis_client: redis.Redis
) -> None:
    with pytest.raises(RunInputError, match="input 'name' is required"):
        client.schedules.add("greetings", every_s=3600, plan=greeting_plan(), inputs={})
    assert written_keys(redis_client) == []

    schedule = client.schedules.add(
        "greetings", every_s=3600, plan=greeting_plan(), inputs={"name": "Cy", "times": 4}
    )
    assert schedule.inputs == {"name": "Cy", "times": 4}
    fire = client.schedules.run_now("greetings")
    assert fire.run_id is not None
    state = client.wait(fire.run_id, timeout=30)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result["card"] == {"to": "Cy", "times": 4}
    assert state.inputs == {"name": "Cy", "times": 4, "greeting": "hello"}


@pytest.mark.subprocess
def test_schedule_add_takes_input_flags(env: dict[str, str], settings: Settings) -> None:
    added = dagwright(
        "schedule", "add", "hello", "--plan", GREETING, "--every", "3600",
        "--input", "name=Di", "--json", env=env,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json_out(added)["inputs"] == {"name": "Di"}
    fire = Client(settings).schedules.run_now("hello")
    assert fire.run_id is not None
    assert Client(settings).result(fire.run_id, timeout=30)["greet"] == "hello Di"

    refused = dagwright(
        "schedule", "add", "bad", "--plan", GREETING, "--every", "60", "--input", "times=x",
        env=env,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "input 'name' is required" in refused.stderr


@pytest.mark.usefixtures("worker")
def test_an_instruction_template_reaches_the_agent(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    fake_llm.add(turn(WRITER, 1, text("Otters hold hands while they sleep.")))
    plan = PlanBuilder("Write a fact")
    plan.input("animal", "string", required=True)
    plan.agent("fact", "writer", "Write one fact about {{ inputs.animal }}.")
    state = client.submit(plan.build(), inputs={"animal": "sea otters"}).wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    [request] = fake_llm.requests
    asked = text_of(request.body["messages"][0]["content"])
    assert "Write one fact about sea otters." in asked and "{{" not in asked


@pytest.mark.usefixtures("worker")
def test_a_goal_runs_inputs_reach_its_planned_plan(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    plan = {
        "goal": "g",
        "output": "hello",
        "nodes": [
            {
                "id": "hello",
                "type": "function",
                "function": "concat",
                "params": {"parts": ["hello", "{{ inputs.name }}"]},
            }
        ],
    }
    fake_llm.add(
        {
            "match": {"system_contains": PLANNER},
            "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
        }
    )
    run = client.submit(goal="Greet the person named in the inputs", inputs={"name": "Eve"})
    state = run.wait(timeout=30)
    assert state.status == RunStatus.SUCCEEDED, state.nodes
    assert state.result == "hello Eve"
    assert state.inputs == {"name": "Eve"}
    planning = text_of(fake_llm.requests[0].body["messages"][0]["content"])
    assert 'The run was given these inputs: {"name": "Eve"}' in planning


def test_hostile_params_with_templates_are_refused_by_size_not_expanded(client: Client) -> None:
    parts: Any = ["{{ inputs.topic }}"] * 10
    for _ in range(19):
        parts = [parts] * 10  # 10^20 strings, by shared references
    plan = plan_of(
        {"id": "a", "type": "function", "function": "concat", "params": {"parts": parts}}
    )
    with pytest.raises(PlanError, match="DAGWRIGHT_MAX_PARAMS_BYTES"):
        client.submit(plan, inputs={"topic": "t"})
    unclosed = plan_of({"id": "a", "type": "writer", "instruction": "{{ inputs" * 50_000})
    assert bind_inputs(unclosed, {"topic": "t"}, 1000).plan == unclosed
    assert client.list_runs() == []
