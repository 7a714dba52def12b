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
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dagwright.errors import PlanError, RunInputError
from dagwright.models import Node, Plan
from dagwright.shown_ids import shown_id

NAME = r"[A-Za-z0-9_-]+"
REFERENCE = re.compile(r"\{\{\s*inputs\.(" + NAME + r"(?:\." + NAME + r")*)\s*\}\}")
# Anything that looks like a reference to inputs, well-formed or not (bounded: an unclosed
# `{{ inputs` repeated through a long text must not make each match scan to its end).
LOOKS_LIKE_REFERENCE = re.compile(r"\{\{\s{0,20}inputs\b[^}]{0,200}\}\}")


def template_texts(node: Node) -> Iterator[tuple[str, str]]:
    """Each text of ``node`` that is a template, with the field it is in."""
    if node.instruction:
        yield "instruction", node.instruction
    for text in _strings(node.params):
        yield "params", text


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value``, each container visited once: a hostile plan's params may
    share one list a billion times over (``json_shapes``), which a plain walk would expand."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict | list) and id(item) not in seen:
            seen.add(id(item))
            stack.extend(reversed(list(item.values() if isinstance(item, dict) else item)))


def template_problems(plan: Plan, declared: list[str]) -> list[str]:
    """Plan problems of its templates: a malformed reference, or one naming an input the
    plan does not declare (in ``inputs:``)."""
    problems: list[str] = []
    for node in plan.nodes:
        for where, text in template_texts(node):
            for found in LOOKS_LIKE_REFERENCE.finditer(text):
                problem = _reference_problem(node.id, where, found.group(0), declared)
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
    # Not through a dump: a hostile plan's params may share one list a billion times,
    # which only the size checks that follow measure without expanding.
    return plan.model_copy(update={"nodes": nodes})


def _node_with_values(node: Node, inputs: dict[str, Any], missing: list[str]) -> Node:
    if not any(REFERENCE.search(text) for _, text in template_texts(node)):
        return node
    filler = _Filler(node.id, inputs, missing)
    update: dict[str, Any] = {"params": filler.value_of(node.params)}
    if node.instruction:
        update["instruction"] = _text_with_values(node.instruction, node.id, inputs, missing)
    try:  # validated again (the params' depth), from its fields as they are: no dump
        return Node.model_validate({**dict(node), **update})
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise PlanError([f"node {shown_id(node.id)!r} with its inputs: {problem}"]) from None


@dataclass
class _Filler:
    """Puts the values in one node's params. A container met twice (shared references)
    is filled once and shared again: the result is no bigger than what was given."""

    node_id: str
    inputs: dict[str, Any]
    missing: list[str]
    done: dict[int, Any] = field(default_factory=dict)

    def value_of(self, value: Any) -> Any:
        if isinstance(value, str):
            whole = REFERENCE.fullmatch(value.strip())
            if whole is not None:
                return _lookup(whole.group(1), self.node_id, self.inputs, self.missing)
            return _text_with_values(value, self.node_id, self.inputs, self.missing)
        if not isinstance(value, dict | list) or id(value) in self.done:
            return self.done.get(id(value), value)
        if isinstance(value, dict):
            filled: Any = {key: self.value_of(item) for key, item in value.items()}
        else:
            filled = [self.value_of(item) for item in value]
        self.done[id(value)] = filled
        return filled


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
