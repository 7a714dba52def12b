"""Plans from YAML/JSON files and from the Python builder; errors name what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagwright import PlanBuilder, PlanError, RetryPolicy, load_plan
from dagwright.models import Plan

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "plans"


def test_diamond_example_loads_with_the_design_field_names() -> None:
    plan = load_plan(EXAMPLES / "diamond.yaml")
    assert [node.id for node in plan.nodes] == ["a", "b", "c", "d"]
    assert plan.nodes[3].depends_on == ["b", "c"]
    assert plan.output_nodes() == ["d"]


def test_json_plans_load_too(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"nodes": [{"id": "a", "type": "function", "function": "noop"}]}))
    assert load_plan(path).nodes[0].id == "a"


def test_sinks_are_the_default_output() -> None:
    plan = Plan.model_validate(
        {
            "nodes": [
                {"id": "a", "type": "t"},
                {"id": "b", "type": "t", "depends_on": ["a"]},
                {"id": "c", "type": "t"},
            ]
        }
    )
    assert plan.output_nodes() == ["b", "c"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodes: [", "not valid YAML: "),
        ("- 1\n- 2", "a plan is a mapping with `nodes:`; found list"),
        ("", "a plan is a mapping with `nodes:`; found nothing"),
        ("nodes: []", "nodes: List should have at least 1 item after validation, not 0"),
        (
            "nodes:\n  - {id: a, type: function, fnction: noop}",
            "node 'a'.fnction: unknown field (check its spelling)",
        ),
        (
            "nodes:\n  - {id: A!, type: function}",
            "node 'A!'.id: 'A!' is not a valid id: use lowercase letters",
        ),
        (
            "nodes:\n  - {id: a, type: function, retry: {max_attempts: 0}}",
            "node 'a'.retry.max_attempts",
        ),
    ],
)
def test_malformed_plans_say_what_is_wrong(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError) as info:
        load_plan(path)
    assert str(info.value).startswith(f"{path}: {expected}")


def test_yaml_syntax_errors_give_the_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("nodes:\n  - id: a\n    type: [function\n")
    with pytest.raises(PlanError, match="line 4"):
        load_plan(path)


def test_missing_file() -> None:
    with pytest.raises(PlanError, match=r"no such plan file: nowhere\.yaml"):
        load_plan("nowhere.yaml")


def test_builder_produces_the_same_model_as_a_file() -> None:
    plan = PlanBuilder("Join two greetings built from one root")
    a = plan.function("a", "concat", params={"parts": ["hello"]})
    b = plan.function("b", "concat", params={"parts": ["left"]}, depends_on=[a])
    c = plan.function("c", "concat", params={"parts": ["right"]}, depends_on=[a])
    plan.function("d", "concat", params={"sep": " + "}, depends_on=[b, c])
    assert plan.build(output="d") == load_plan(EXAMPLES / "diamond.yaml")


def test_builder_errors_are_plan_errors() -> None:
    plan = PlanBuilder()
    plan.function("Bad Id", "noop", retry=RetryPolicy(max_attempts=2))
    with pytest.raises(PlanError, match="is not a valid id"):
        plan.build()
