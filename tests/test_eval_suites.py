"""Suite files: what parses, what is refused (one line per problem, naming where), and the
plan changes --model and --set make. Pure: no Redis, no workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dagwright.errors import InputError
from dagwright.evals.changes import FieldChange, changed_plan
from dagwright.evals.suite import (
    Contains,
    Judge,
    NotContains,
    SuiteError,
    load_suite,
    parse_suite,
    suite_digest,
)
from dagwright.plans.files import load_plan

EXAMPLES = Path(__file__).parent.parent / "examples"


def suite(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "s",
        "plan": "plan.yaml",
        "scorers": [{"contains": "x"}],
        "cases": [{"name": "a"}],
    }
    data.update(overrides)
    return data


def problems(data: Any) -> list[str]:
    with pytest.raises(SuiteError) as caught:
        parse_suite(data, source="s.yaml")
    return caught.value.problems


def test_the_shipped_example_suite_parses() -> None:
    loaded = load_suite(EXAMPLES / "evals" / "suite.yaml", max_bytes=1_000_000)
    assert [case.name for case in loaded.cases] == ["redis-streams", "consistent-hashing", "raft"]
    labels = [scorer.label() for scorer in loaded.scorers_of(loaded.cases[0])]
    assert labels[0] == "succeeded" and "clear" in labels and labels[-1] == "contains:XADD"


def test_a_scorer_is_its_argument_or_its_options() -> None:
    parsed = parse_suite(
        suite(
            scorers=[
                {"contains": "Paris"},
                {"not_contains": {"value": "Paris", "ignore_case": True}},
                {"equals": {"a": 1}},  # a mapping without `value`: the value itself
                {"equals": {"value": {"a": 1}, "name": "eq"}},
                {"judge": {"rubric": "Good", "scale": [0, 10], "pass_score": 7}},
            ]
        )
    )
    contains, not_contains, equals, equals_named, judge = parsed.scorers
    assert isinstance(contains, Contains) and contains.value == "Paris"
    assert isinstance(not_contains, NotContains) and not_contains.ignore_case
    assert equals.value == {"a": 1} == equals_named.value
    assert isinstance(judge, Judge) and judge.passing_grade == 7
    assert [s.label() for s in parsed.scorers][:3] == [
        "contains:Paris",
        "not_contains:Paris",
        'equals:{"a": 1}',
    ]


def test_a_suite_dumps_as_it_is_written_and_parses_back() -> None:
    parsed = parse_suite(suite(scorers=[{"contains": "x"}, {"not_contains": "x"}]))
    dumped = parsed.model_dump(mode="json", by_alias=True)
    assert list(dumped["scorers"][1]) == ["not_contains"]
    assert parse_suite(dumped) == parsed
    other = parse_suite(
        suite(scorers=[{"contains": "x"}, {"contains": {"value": "x", "name": "y"}}])
    )
    assert suite_digest(parsed) != suite_digest(other)


@pytest.mark.parametrize(
    ("data", "wanted"),
    [
        ([], "a suite is a mapping with `cases:`; found list"),
        (suite(cases=[]), "cases: List should have at least 1 item"),
        (suite(cases=[{"name": "a"}, {"name": "a"}]), "case names must be unique: a"),
        (suite(scorers=[]), "no scorer: give `scorers:`"),
        (suite(scorers=[{"contains": "x", "regex": "y"}]), "a scorer is a mapping of one key"),
        (suite(scorers=[{"bogus": 1}]), "scorers.0: no scorer kind 'bogus'"),
        (suite(scorers=[{"contains": {"value": "x", "colour": 1}}]), "colour: unknown field"),
        (suite(scorers=[{"regex": "(?=x)"}]), "RE2 cannot use the pattern"),
        (suite(scorers=[{"json_schema": {"$ref": "file:///etc/passwd"}}]), "points outside"),
        (suite(scorers=[{"number": {}}]), "give min, max or both"),
        (
            suite(scorers=[{"judge": {"rubric": "x", "scale": [1, 5], "pass_score": 9}}]),
            "outside the scale",
        ),
        (suite(scorers=[{"contains": "x"}, {"contains": "x"}]), "two scorers named 'contains:x'"),
        (suite(plan=None), "give `plan`, or a `goal`"),
        (suite(goal="Do it"), "give `plan` or `goal`, not both"),
        (suite(cases=[{"name": "a", "goal": "g"}]), "a case of a plan suite gives inputs"),
        (suite(cases=[{"name": "A b"}]), "cases.0.name: String should match pattern"),
        (suite(parallel=0), "parallel: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_suite_says_what_and_where(data: Any, wanted: str) -> None:
    found = problems(data)
    assert any(wanted in problem for problem in found), found
    assert all("\n" not in problem for problem in found)


def test_a_suite_file_is_bounded_and_named_in_its_problems(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("name: s\n" + "#" * 2000)
    with pytest.raises(SuiteError, match=r"big\.yaml"):
        load_suite(big, max_bytes=1000)
    with pytest.raises(SuiteError, match="no such suite file"):
        load_suite(tmp_path / "none.yaml", max_bytes=1000)


def test_cases_are_picked_by_name_or_tag() -> None:
    parsed = parse_suite(
        suite(cases=[{"name": "a", "tags": ["x"]}, {"name": "b", "tags": ["y"]}, {"name": "c"}])
    )
    assert [c.name for c in parsed.picked(None, ["y", "x"])] == ["a", "b"]
    assert [c.name for c in parsed.picked(["c"], None)] == ["c"]
    with pytest.raises(SuiteError, match="no case named 'd'"):
        parsed.picked(["d"], None)
    with pytest.raises(SuiteError, match="is tagged z"):
        parsed.picked(None, ["z"])


def test_model_and_set_change_a_plan() -> None:
    plan = load_plan(EXAMPLES / "evals" / "explain.yaml")
    changes = [
        FieldChange.parse("write.instruction=Be brief."),
        FieldChange.parse("write.max_tokens=512"),
        FieldChange.parse("brief.params.parts=[a, b]"),
    ]
    changed = changed_plan(plan, model="claude-opus-4-5", changes=changes, agent_types={"writer"})
    write = next(node for node in changed.nodes if node.id == "write")
    brief = next(node for node in changed.nodes if node.id == "brief")
    assert (write.model, write.instruction, write.max_tokens) == (
        "claude-opus-4-5",
        "Be brief.",
        512,
    )
    assert brief.model is None and brief.params == {"parts": ["a", "b"]}


def test_a_set_value_may_be_a_file(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Write it\nin two lines.")
    assert FieldChange.parse(f"*.instruction=@{prompt}").value == "Write it\nin two lines."
    with pytest.raises(InputError, match="cannot read"):
        FieldChange.parse(f"write.instruction=@{tmp_path / 'none.md'}")


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("write", "write NODE.FIELD=VALUE"),
        ("write.colour=red", "'colour' is not settable"),
        ("write.model.x=y", "only params and budget have keys"),
    ],
)
def test_a_bad_set_is_refused(text: str, wanted: str) -> None:
    with pytest.raises(InputError, match=wanted):
        FieldChange.parse(text)


def test_a_set_that_breaks_the_plan_is_a_plan_problem() -> None:
    plan = load_plan(EXAMPLES / "evals" / "explain.yaml")
    with pytest.raises(InputError, match="max_tokens"):
        changed_plan(
            plan, model=None, changes=[FieldChange.parse("write.max_tokens=-1")], agent_types=set()
        )
