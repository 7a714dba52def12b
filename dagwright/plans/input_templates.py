"""``{{ inputs.key }}`` in a plan's params and instructions: a template with no code.

The only form is a path of names, ``{{ inputs.<key>[.<subkey>...] }}``: the run's input
``key``, then keys of the mapping it holds. No filters, no indexing, no expressions, no
attribute access: a plan is input from outside, and the values are data. A string that is
the reference alone (``params: {n: "{{ inputs.n }}"}``) becomes the value with its JSON
type; a reference inside text is written as text (a string as itself, anything else as
JSON). Only ``params`` (every string in them, at any depth) and ``instruction`` are
templates; ``code``, ``goal`` and the rest are taken as written.

A ``{{ inputs… }}`` that is not of this form, or names an input the plan does not
declare, is a plan problem; one naming a value the run lacks (an optional input without a
default, a missing subkey) is an input problem. Both are found at submit, before anything
is written: the stored plan holds the values, not the templates (``run_inputs``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dagwright.errors import RunInputError
from dagwright.models import Node, Plan
from dagwright.plans.files import parse_plan
from dagwright.shown_ids import shown_id

NAME = r"[A-Za-z0-9_-]+"
REFERENCE = re.compile(r"\{\{\s*inputs\.(" + NAME + r"(?:\." + NAME + r")*)\s*\}\}")
# Anything that looks like a reference to inputs, well-formed or not.
LOOKS_LIKE_REFERENCE = re.compile(r"\{\{\s*inputs\b[^}]*\}\}")


@dataclass(frozen=True)
class Reference:
    """One ``{{ inputs.… }}`` of a plan: where it is and the path it names."""

    node: str
    field: str  # "instruction" or "params"
    path: tuple[str, ...]

    @property
    def shown(self) -> str:
        return "inputs." + ".".join(self.path)


def template_texts(node: Node) -> Iterator[tuple[str, str]]:
    """Each text of ``node`` that is a template, with the field it is in."""
    if node.instruction:
        yield "instruction", node.instruction
    for text in _strings(node.params):
        yield "params", text


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def template_problems(plan: Plan, declared: list[str]) -> list[str]:
    """Plan problems of its templates: a malformed reference, or one naming an input the
    plan does not declare (in ``inputs:``)."""
    problems: list[str] = []
    for node in plan.nodes:
        for field, text in template_texts(node):
            for found in LOOKS_LIKE_REFERENCE.finditer(text):
                problem = _reference_problem(node.id, field, found.group(0), declared)
                if problem and problem not in problems:
                    problems.append(problem)
    return problems


def _reference_problem(node_id: str, field: str, text: str, declared: list[str]) -> str | None:
    where = f"node {shown_id(node_id)!r} {field}"
    match = REFERENCE.fullmatch(text)
    if match is None:
        return (
            f"{where}: {text[:80]!r} is not a template this takes: only "
            "{{ inputs.<name> }} or {{ inputs.<name>.<key> }} (no filters, no code)"
        )
    name = match.group(1).split(".")[0]
    if name in declared:
        return None
    takes = f"it declares {', '.join(declared)}" if declared else "it declares no `inputs:`"
    return f"{where}: {{{{ inputs.{name[:60]} }}}} names no input of the plan ({takes})"


def substituted(plan: Plan, inputs: dict[str, Any]) -> Plan:
    """The plan with every reference replaced by the run's value (RunInputError naming
    each reference with no value). The plan's templates are assumed checked."""
    missing: list[str] = []
    nodes = [_node_with_values(node, inputs, missing) for node in plan.nodes]
    if missing:
        raise RunInputError(list(dict.fromkeys(missing)))
    if all(new is old for new, old in zip(nodes, plan.nodes, strict=True)):
        return plan
    data = plan.model_dump(mode="json", exclude_defaults=True)
    data["nodes"] = [node.model_dump(mode="json", exclude_defaults=True) for node in nodes]
    return parse_plan(data)


def _node_with_values(node: Node, inputs: dict[str, Any], missing: list[str]) -> Node:
    if not any(REFERENCE.search(text) for _, text in template_texts(node)):
        return node
    update: dict[str, Any] = {"params": _value_of(node.params, node.id, inputs, missing)}
    if node.instruction:
        update["instruction"] = _text_with_values(node.instruction, node.id, inputs, missing)
    return node.model_copy(update=update)


def _value_of(value: Any, node_id: str, inputs: dict[str, Any], missing: list[str]) -> Any:
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value.strip())
        if whole is not None:
            return _lookup(whole.group(1), node_id, inputs, missing)
        return _text_with_values(value, node_id, inputs, missing)
    if isinstance(value, dict):
        return {key: _value_of(item, node_id, inputs, missing) for key, item in value.items()}
    if isinstance(value, list):
        return [_value_of(item, node_id, inputs, missing) for item in value]
    return value


def _text_with_values(text: str, node_id: str, inputs: dict[str, Any], missing: list[str]) -> str:
    def rendered(match: re.Match[str]) -> str:
        value = _lookup(match.group(1), node_id, inputs, missing)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    return REFERENCE.sub(rendered, text)


def _lookup(dotted: str, node_id: str, inputs: dict[str, Any], missing: list[str]) -> Any:
    """The value at ``inputs.<dotted>``; None (and a problem in ``missing``) if absent."""
    value: Any = inputs
    for depth, name in enumerate(dotted.split(".")):
        if not isinstance(value, dict) or name not in value:
            what = "input" if depth == 0 else "key"
            missing.append(
                f"node {shown_id(node_id)!r} uses {{{{ inputs.{dotted[:80]} }}}}, and the run's "
                f"inputs have no {what} {name[:60]!r} (give it, or a default in `inputs:`)"
            )
            return None
        value = value[name]
    return value
