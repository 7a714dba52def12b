"""Fuzzing plan documents through the loader and the validator (issue 16).

Random JSON/YAML structures, and valid plans mutated value by value and character by
character, are either accepted as a plan that serializes, or refused with an InputError:
never another exception.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagwright.errors import InputError
from dagwright.orchestrator.control.submission import check_plan
from dagwright.plans.documents import parse_plan_text
from dagwright.plans.files import parse_plan
from dagwright.settings import Settings
from dagwright.workers import builtin_registry

SETTINGS = Settings()
REGISTRY = builtin_registry()
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

VALID_PLAN: dict[str, Any] = {
    "goal": "join two greetings",
    "output": "d",
    "timeout_s": 600,
    "nodes": [
        {"id": "a", "type": "function", "function": "concat", "params": {"parts": ["hello"]}},
        {
            "id": "d",
            "type": "function",
            "function": "concat",
            "params": {"sep": " + "},
            "depends_on": ["a"],
            "retry": {"max_attempts": 3, "backoff_s": 1, "backoff_max_s": 60},
            "timeout_s": 30,
        },
    ],
}

ODD_VALUES = [math.inf, -math.inf, math.nan, 1e308, -(10**30), 10**100, 0, -1, "", "A!"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # inf and nan included
    st.text(max_size=20),
    st.sampled_from(ODD_VALUES),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


def check_document(text: str, *, json_file: bool) -> None:
    """The property: accepted and serializable, or refused with an InputError."""
    try:
        plan = parse_plan(parse_plan_text(text, json_file=json_file))
        check_plan(plan, SETTINGS, REGISTRY)
    except InputError:
        return
    json.loads(plan.model_dump_json())  # what is stored: JSON without NaN or Infinity


def as_text(document: Any, json_file: bool) -> str:
    if json_file:
        return json.dumps(document)  # allow_nan: Infinity and NaN, as a careless writer does
    return yaml.safe_dump(document)


def places(document: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in the document."""
    found: list[tuple[Any, Any]] = []
    stack = [document]
    while stack:
        item = stack.pop()
        keys = list(item) if isinstance(item, dict) else range(len(item))
        for key in keys:
            found.append((item, key))
            if isinstance(item[key], dict | list):
                stack.append(item[key])
    return found


@st.composite
def mutated_plans(draw: st.DrawFn) -> Any:
    document = copy.deepcopy(VALID_PLAN)
    for _ in range(draw(st.integers(1, 3))):
        container, key = draw(st.sampled_from(places(document)))
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            container[key] = draw(values)
        elif action == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[draw(st.text(max_size=10))] = draw(values)
        else:
            container.append(draw(values))
        if not places(document):
            break
    return document


@st.composite
def garbled(draw: st.DrawFn, text: str) -> str:
    """``text`` with a few characters replaced, inserted or deleted."""
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(start + 3, len(text))))
        text = text[:start] + draw(st.text(max_size=3)) + text[end:]
    return text


@FUZZ
@given(document=values, json_file=st.booleans())
def test_random_documents_are_plans_or_input_errors(document: Any, json_file: bool) -> None:
    check_document(as_text(document, json_file), json_file=json_file)


@FUZZ
@given(document=mutated_plans(), json_file=st.booleans())
def test_mutated_plans_are_plans_or_input_errors(document: Any, json_file: bool) -> None:
    check_document(as_text(document, json_file), json_file=json_file)


@FUZZ
@given(data=st.data(), json_file=st.booleans())
def test_garbled_plan_files_are_plans_or_input_errors(data: st.DataObject, json_file: bool) -> None:
    text = data.draw(garbled(as_text(VALID_PLAN, json_file)))
    check_document(text, json_file=json_file)


@FUZZ
@given(text=st.text(max_size=200), json_file=st.booleans())
def test_any_text_is_a_plan_or_an_input_error(text: str, json_file: bool) -> None:
    check_document(text, json_file=json_file)
