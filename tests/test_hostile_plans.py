"""Hostile plan input (issue 16): every way a plan file, a caller or the planner found to
exhaust memory, loop for ever or crash is refused with one PlanError or InputError.

Each case was found by trying it: a 536-byte alias bomb took 2.2 GB on `run`, a 78 MB JSON
plan 7.7 GB, `.inf` backoffs re-queued a node for good, 500-deep nesting was an internal
error.
"""

from __future__ import annotations

import json
import math
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dagwright import Client, RunStatus
from dagwright.errors import InputError, PlanError
from dagwright.json_shapes import json_shape
from dagwright.models import MAX_PARAMS_DEPTH, Plan
from dagwright.orchestrator.control.run_request import RunRequest
from dagwright.orchestrator.control.submission import check_plan
from dagwright.planning.planner import PlanRequest, RestrictedCatalog, plan_problems, planner_spec
from dagwright.plans.documents import MAX_DOCUMENT_DEPTH
from dagwright.plans.files import load_plan, parse_plan
from dagwright.settings import Settings
from dagwright.testing import FakeAnthropicServer
from dagwright.workers import builtin_registry
from tests.support.cli import cli_env, one_error_line

NODE = "{id: a, type: function, function: concat, params: {parts: [x]}}"

# 536 bytes: nine aliases of nine aliases... of "lol", 9**7 (4.8 million) strings expanded.
ALIAS_BOMB = (
    "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
    + "".join(
        f"{level}: &{level} [{','.join([f'*{below}'] * 9)}]\n"
        for below, level in zip("abcdef", "bcdefg", strict=True)
    )
    + "nodes:\n  - {id: x, type: function, function: concat, params: {parts: *g}}\n"
)


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(path: Path) -> str:
    """The one line that loading ``path`` is refused with."""
    with pytest.raises(PlanError) as info:
        load_plan(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def write_100_mb_plan(path: Path) -> Path:
    line = "  - {id: n, type: function, function: concat, params: {parts: [" + "x" * 900 + "]}}\n"
    chunk = line * (1024 * 1024 // len(line) + 1)
    with path.open("w") as file:
        file.write("nodes:\n")
        for _ in range(100):
            file.write(chunk)
    return path


# -- YAML aliases --------------------------------------------------------------------


def test_an_alias_bomb_is_refused_where_its_first_alias_is(tmp_path: Path) -> None:
    assert len(ALIAS_BOMB) < 600
    message = refusal(write(tmp_path, ALIAS_BOMB))
    assert "YAML aliases are not allowed in plan files (*a at line 2, column" in message


def test_a_merge_key_is_an_alias_too(tmp_path: Path) -> None:
    text = "x: &base {type: function}\nnodes:\n  - {<<: *base, id: a, function: noop}\n"
    assert "YAML aliases are not allowed" in refusal(write(tmp_path, text))


def test_shared_references_from_python_count_as_often_as_they_appear() -> None:
    # The Python form of an alias bomb: 10**20 strings, in 20 lists of 10 references.
    parts: Any = ["lol"] * 10
    for _ in range(19):
        parts = [parts] * 10
    bomb = parse_plan({"nodes": [{"id": "a", "type": "function", "params": {"parts": parts}}]})
    with pytest.raises(PlanError, match=r"DAGWRIGHT_MAX_PARAMS_BYTES"):
        check_plan(bomb, Settings(), builtin_registry())


def test_params_that_contain_themselves_are_refused() -> None:
    params: dict[str, Any] = {}
    params["again"] = params
    with pytest.raises(PlanError, match="contains itself"):
        parse_plan({"nodes": [{"id": "a", "type": "function", "params": params}]})


# -- sizes ---------------------------------------------------------------------------


def test_a_100_mb_plan_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = write_100_mb_plan(tmp_path / "plan.json")
    assert path.stat().st_size > 100 * 1024 * 1024
    message = refusal(path)
    assert message == (
        f"{path}: the plan file is over 4194304 bytes, the limit (DAGWRIGHT_MAX_PLAN_FILE_BYTES)"
    )


def test_a_file_without_end_is_read_no_further_than_the_limit() -> None:
    with pytest.raises(PlanError, match="the plan file is over 2048 bytes"):
        load_plan("/dev/zero", max_bytes=2048)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_bytes(b"nodes: \xff\xfe")
    assert "not UTF-8" in refusal(path)


def test_an_oversized_goal_in_a_plan_names_its_setting() -> None:
    plan = parse_plan({"goal": "g" * 10_001, "nodes": [{"id": "a", "type": "function"}]})
    with pytest.raises(
        PlanError, match=r"10001 characters; the limit is 10000 \(DAGWRIGHT_MAX_GOAL"
    ):
        check_plan(plan, Settings(), builtin_registry())


def test_oversized_params_name_their_setting() -> None:
    params = {"parts": ["x" * 1000] * 2000}  # 2 MB as JSON
    plan = parse_plan({"nodes": [{"id": "a", "type": "function", "params": params}]})
    with pytest.raises(PlanError) as info:
        check_plan(plan, Settings(), builtin_registry())
    assert info.value.problems[0] == (
        f"node 'a' has {json_shape(params).size_bytes} bytes of params; the limit is 1048576 "
        "(DAGWRIGHT_MAX_PARAMS_BYTES)"
    )


def test_an_oversized_plan_names_its_setting() -> None:
    nodes = [{"id": f"n{i}", "type": "function", "instruction": "x" * 2000} for i in range(3)]
    plan = parse_plan({"nodes": nodes})
    with pytest.raises(PlanError, match=r"the limit is 4096 \(DAGWRIGHT_MAX_PLAN_BYTES\)"):
        check_plan(plan, Settings(max_plan_bytes=4096), builtin_registry())


def test_the_measured_size_is_that_of_the_json_stored() -> None:
    params = {"a": [1, -20, 3.5, None, True, False, "é", {"b": [10**40]}], "c": "x\u00e9"}
    stored = json.dumps(params, ensure_ascii=False, separators=(",", ":")).encode()
    assert json_shape(params).size_bytes == len(stored)


# -- parsers -------------------------------------------------------------------------


def test_json_plans_are_read_by_the_json_parser(tmp_path: Path) -> None:
    text = json.dumps({"nodes": [{"id": "a", "type": "function", "function": "noop"}]}, indent="\t")
    assert load_plan(write(tmp_path, text, "plan.json")).nodes[0].id == "a"
    assert "not valid JSON" in refusal(write(tmp_path, "nodes: []", "plan.json"))


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("plan.yaml", f"nodes: [{NODE}]\nnodes: [{NODE}]\n", "duplicate key 'nodes'"),
        ("plan.yaml", "nodes:\n  - {id: a, id: b, type: function}\n", "duplicate key 'id'"),
        ("plan.json", '{"nodes": [], "nodes": []}', "duplicate key 'nodes'"),
        ("plan.json", '{"nodes": [{"id": "a", "id": "b"}]}', "duplicate key 'id'"),
    ],
)
def test_duplicate_keys_are_refused(tmp_path: Path, name: str, text: str, expected: str) -> None:
    message = refusal(write(tmp_path, text, name))
    assert f"{expected}: give each key once" in message


def test_a_yaml_duplicate_key_is_shown_where_it_is(tmp_path: Path) -> None:
    assert "at line 2, column 1" in refusal(write(tmp_path, f"nodes: [{NODE}]\nnodes: []\n"))


# -- non-finite numbers and durations ------------------------------------------------


@pytest.mark.parametrize(
    "field",
    ["retry: {backoff_s: .inf}", "timeout_s: .inf", "params: {n: .nan}", "timeout_s: -.Inf"],
)
def test_non_finite_yaml_numbers_are_refused(tmp_path: Path, field: str) -> None:
    text = f"nodes:\n  - id: a\n    type: function\n    {field}\n"
    assert "only finite numbers at line 4" in refusal(write(tmp_path, text))


def test_a_plan_timeout_of_inf_is_refused_not_an_internal_error(tmp_path: Path) -> None:
    assert "only finite numbers" in refusal(write(tmp_path, f"timeout_s: .inf\nnodes: [{NODE}]\n"))


@pytest.mark.parametrize("number", ["1e999", "-1e999", "Infinity", "-Infinity", "NaN"])
def test_non_finite_json_numbers_are_refused(tmp_path: Path, number: str) -> None:
    text = '{"nodes": [{"id": "a", "type": "function", "retry": {"backoff_s": N}}]}'
    text = text.replace("N", number)
    assert "only finite numbers" in refusal(write(tmp_path, text, "plan.json"))


@pytest.mark.parametrize(
    "node",
    [
        {"retry": {"backoff_s": math.inf}},
        {"retry": {"backoff_max_s": math.nan}},
        {"timeout_s": math.inf},
        {"approval_timeout_s": math.inf},
        {"budget": {"max_cost_usd": math.inf}},
        {"params": {"deep": [{"x": math.inf}]}},
    ],
)
def test_non_finite_numbers_from_python_are_refused(node: dict[str, Any]) -> None:
    with pytest.raises(PlanError, match="finite number"):
        parse_plan({"nodes": [{"id": "a", "type": "function", **node}]})


def test_a_non_finite_plan_timeout_from_python_is_refused() -> None:
    with pytest.raises(PlanError, match="timeout_s: Input should be a finite number"):
        parse_plan({"timeout_s": math.inf, "nodes": [{"id": "a", "type": "function"}]})


@pytest.mark.parametrize(
    "node",
    [
        {"retry": {"backoff_s": 86_401}},
        {"retry": {"backoff_max_s": 1e300}},
        {"timeout_s": 1e300},
        {"approval_timeout_s": 31 * 24 * 3600},
    ],
)
def test_durations_have_a_ceiling(node: dict[str, Any]) -> None:
    with pytest.raises(PlanError, match="less than or equal to"):
        parse_plan({"nodes": [{"id": "a", "type": "function", **node}]})


@pytest.mark.parametrize("timeout_s", [math.inf, math.nan, 1e300, -1.0, 0.0])
def test_a_run_timeout_given_at_submit_is_finite_and_bounded(timeout_s: float) -> None:
    with pytest.raises(InputError, match="the run timeout must be a positive number"):
        RunRequest(goal="g", timeout_s=timeout_s)


# -- nesting -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plan.yaml", "plan.json"])
@pytest.mark.parametrize("depth", [500, 100_000])
def test_deep_nesting_is_refused(tmp_path: Path, name: str, depth: int) -> None:
    text = '{"nodes": [{"id": "a", "type": "function", "params": {"p": P}}]}'
    text = text.replace("P", "[" * depth + "]" * depth)
    message = refusal(write(tmp_path, text, name))
    if depth > 1000 and name == "plan.yaml":  # libyaml's scanner stops first, past 1000 levels
        assert "not valid YAML: exceeded maximum nesting depth" in message
    else:
        assert f"the plan is nested more than {MAX_DOCUMENT_DEPTH} levels deep" in message


def test_params_nested_past_their_limit_are_refused() -> None:
    deep: Any = []
    for _ in range(MAX_PARAMS_DEPTH - 1):  # with params itself, one level too many
        deep = [deep]
    with pytest.raises(PlanError, match=f"nested {MAX_PARAMS_DEPTH + 1} levels deep"):
        parse_plan({"nodes": [{"id": "a", "type": "function", "params": {"p": deep}}]})
    for _ in range(100_000):  # from Python, past any recursion limit
        deep = [deep]
    with pytest.raises(PlanError, match="levels deep; the limit is"):
        parse_plan({"nodes": [{"id": "a", "type": "function", "params": {"p": deep}}]})


# -- values no JSON encoder writes, and scalars PyYAML fails on --------------------------


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("plan.json", '{"goal": "\\ud800", "nodes": []}', "not valid Unicode"),
        ("plan.yaml", 'goal: "\\ud800"\nnodes: []\n', "invalid Unicode character escape"),
        ("plan.yaml", "goal: !!binary aGVsbG8=\nnodes: []\n", "holds bytes"),
        ("plan.yaml", "nodes:\n  - {1: x}\n", "a key that is not a string"),
        ("plan.json", f'{{"timeout_s": 1{"0" * 5000}}}', "not valid JSON: Exceeds the limit"),
        ("plan.yaml", f"timeout_s: 1{'0' * 5000}\n", "not valid YAML: Exceeds the limit"),
        ("plan.yaml", "goal: !!bool maybe\n", "not valid YAML"),
        ("plan.yaml", "goal: !!timestamp nope\n", "not valid YAML"),
        ("plan.yaml", "goal: 2001-02-30\n", "not valid YAML: day is out of range"),
        ("plan.yaml", "goal: !!float abc\n", "not valid YAML"),
        ("plan.yaml", "goal: !!python/object:os.system {}\n", "not valid YAML"),
        ("plan.yaml", "a: 1\n---\nb: 2\n", "not valid YAML"),
    ],
)
def test_values_json_cannot_hold_are_refused(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    assert expected in refusal(write(tmp_path, text, name))


def test_a_lone_surrogate_from_python_is_refused() -> None:
    plan = parse_plan({"goal": "\ud800", "nodes": [{"id": "a", "type": "function"}]})
    with pytest.raises(PlanError, match="not valid Unicode"):
        check_plan(plan, Settings(), builtin_registry())


# -- hostile values in messages ------------------------------------------------------


def test_a_huge_bad_id_is_quoted_short() -> None:
    with pytest.raises(PlanError) as info:
        parse_plan({"nodes": [{"id": "X" * 1_000_000, "type": "function"}]})
    assert len(str(info.value)) < 400  # the id shown twice, cut to 100 characters each


# -- the acceptance test: the real command, in 1 GiB of address space ----------------

GIB = 1024**3


def at_most_1_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("alias bomb", "YAML aliases are not allowed in plan files"),
        ("100 MB", "over 4194304 bytes, the limit (DAGWRIGHT_MAX_PLAN_FILE_BYTES)"),
        (".inf", ".inf is not allowed: only finite numbers at line 1"),
    ],
)
def test_validate_refuses_hostile_plans_in_one_line_and_1_gib(
    tmp_path: Path, case: str, expected: str
) -> None:
    if case == "alias bomb":
        path = write(tmp_path, ALIAS_BOMB)
    elif case == "100 MB":
        path = write_100_mb_plan(tmp_path / "plan.yaml")
    else:
        path = write(tmp_path, f"timeout_s: .inf\nnodes: [{NODE}]\n")
    result = subprocess.run(
        [sys.executable, "-m", "dagwright", "validate", str(path)],
        cwd=tmp_path,
        env=cli_env(None, tmp_path / "data"),
        preexec_fn=at_most_1_gib,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert expected in one_error_line(result)


def test_the_acceptance_limit_is_real() -> None:
    # The same limit, in a child that asks for more: it fails, so the test above means it.
    result = subprocess.run(
        [sys.executable, "-c", "b = bytearray(2 * 1024**3)"],
        preexec_fn=at_most_1_gib,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and "MemoryError" in result.stderr


def test_a_valid_plan_still_loads(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, f"goal: g\ntimeout_s: 60\nnodes: [{NODE}]\n"))
    assert isinstance(plan, Plan) and plan.timeout_s == 60


# -- the Python client and the planner -------------------------------------------------


def test_the_client_refuses_hostile_plans_and_options_before_writing(client: Client) -> None:
    node = {"id": "a", "type": "function", "function": "noop"}
    with pytest.raises(PlanError, match="finite number"):
        client.submit({"nodes": [{**node, "retry": {"backoff_s": math.inf}}]})
    parts: Any = ["lol"] * 10
    for _ in range(19):
        parts = [parts] * 10
    with pytest.raises(PlanError, match="DAGWRIGHT_MAX_PARAMS_BYTES"):
        client.submit({"nodes": [{**node, "params": {"parts": parts}}]})
    with pytest.raises(InputError, match="the run timeout must be"):
        client.submit({"nodes": [node]}, timeout_s=math.inf)
    with pytest.raises(InputError, match="finite number"):
        client.submit({"nodes": [node]}, budget={"max_cost_usd": math.nan})
    assert client.list_runs() == []


@pytest.mark.usefixtures("worker")
def test_a_planner_plan_with_an_infinite_backoff_is_sent_back_for_repair(
    client: Client, fake_llm: FakeAnthropicServer
) -> None:
    def submitted(retry: dict[str, Any], **match: Any) -> dict[str, Any]:
        plan = {"nodes": [{"id": "a", "type": "writer", "instruction": "Do a.", "retry": retry}]}
        plan["output"] = "a"
        return {
            "match": {"system_contains": "You are the planner", **match},
            "reply": {"content": [{"type": "tool_use", "name": "submit_plan", "input": plan}]},
        }

    # How the fake API writes inf (null) matters not: the plan is refused and repaired.
    fake_llm.add(
        submitted({"backoff_s": math.inf}, messages_count=1),
        submitted({"backoff_s": 1}, messages_count=3),
        {
            "match": {"system_contains": "You are the writer"},
            "reply": {"content": [{"type": "text", "text": "done"}]},
        },
    )
    state = client.submit(goal="Write the thing").wait(timeout=60)
    assert state.status == RunStatus.SUCCEEDED and state.result == "done"
    rejection = fake_llm.requests[1].body["messages"][-1]["content"][0]
    assert rejection["is_error"] and "retry.backoff_s: Input should be" in rejection["content"]


def test_what_a_model_writes_as_1e999_fails_the_planner_output_model() -> None:
    answer = json.loads('{"nodes": [{"id": "a", "type": "writer", "retry": {"backoff_s": 1e999}}]}')
    output_model = planner_spec(Settings()).output_model
    assert output_model is not None and issubclass(output_model, Plan)
    with pytest.raises(ValidationError, match="finite number"):
        output_model.model_validate(answer)


def test_a_planner_plan_over_the_size_limits_is_sent_back() -> None:
    request = PlanRequest(goal="g", max_nodes=5, max_depth=3)
    big = parse_plan({"nodes": [{"id": "a", "type": "writer", "instruction": "x" * 5000}]})
    catalog = RestrictedCatalog(builtin_registry())
    problems = plan_problems(big, request, catalog, Settings(max_plan_bytes=4096))
    assert problems and "(DAGWRIGHT_MAX_PLAN_BYTES)" in problems[0]


def test_a_webhook_may_sign_only_with_a_variable_of_the_webhook_secrets_family() -> None:
    """Whoever may submit must not have the workers sign with (and so reveal HMACs of)
    another of their secrets, nor learn which variables they have."""
    hook = {"url": "https://hooks.example.com/x", "secret_env": "DAGWRIGHT_REDIS_URL"}
    plan = {"nodes": [{"id": "a", "type": "function", "function": "noop"}], "webhooks": [hook]}
    with pytest.raises(PlanError) as refused:
        parse_plan(plan, source="plan.json")
    assert "webhooks.0.secret_env" in str(refused.value)
    assert "not a valid id" not in str(refused.value)  # the id wording is for node ids
    hook["secret_env"] = "DAGWRIGHT_WEBHOOK_SECRET_PAGER"
    assert parse_plan(plan, source="plan.json").webhooks[0].secret_env == hook["secret_env"]


def test_a_run_has_at_most_twenty_webhooks_its_plans_and_its_submits_together(
    no_worker_settings: Settings,
) -> None:
    hooks = [{"url": f"https://hooks.example.com/{i}"} for i in range(15)]
    plan = {"nodes": [{"id": "a", "type": "function", "function": "noop"}], "webhooks": hooks}
    with pytest.raises(InputError, match="at most 20 webhooks"):
        Client(no_worker_settings).submit(
            plan, webhooks=[f"https://other.example/{i}" for i in range(6)]
        )
