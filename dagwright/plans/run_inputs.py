"""A plan's run inputs: the JSON Schema a plan declares, and the values a run is given.

A plan that takes arguments declares them as ``inputs:``, a JSON Schema (Draft 2020-12)
of an object: ``properties`` with their types and defaults, ``required``. A run's inputs
(``submit(plan, inputs=...)``, ``dagwright run --input k=v / --inputs FILE``, a
schedule's) are checked against it before anything is written, every problem one line.

An input the schema does not list is refused, as if the schema said
``additionalProperties: false``, unless it says otherwise: a mistyped ``--input nmae=x``
must not run the plan with its default instead. Defaults of the top-level properties are
filled in before the check, so a run's stored inputs hold every value its nodes read.

Pure: no I/O. The CLI's ``key=value`` texts are read here too, since how a text becomes
a value depends on the type the schema gives it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagwright.errors import InputError, PlanError, RunInputError
from dagwright.json_shapes import json_shape
from dagwright.models import Plan
from dagwright.plans.input_templates import (
    LOOKS_LIKE_REFERENCE,
    substituted,
    template_problems,
    template_texts,
)

if TYPE_CHECKING:  # jsonschema and RE2 are imported by the checks, when a plan has inputs
    from jsonschema.exceptions import ValidationError as SchemaMismatch

MAX_INPUTS_DEPTH = 32  # as a node's params: inputs end up in them
SHOWN_VALUE_CHARS = 120  # of a value quoted in a problem


def schema_problems(schema: dict[str, Any] | None) -> list[str]:
    """What is wrong with a plan's ``inputs:`` schema (none for no schema): not an object
    schema, or not one ``json_schemas`` takes (a ``$ref`` outside it, a pattern RE2
    cannot run, too big)."""
    if schema is None:
        return []
    from dagwright.json_schemas import schema_problems as json_schema_problems

    if schema.get("type") != "object":
        return ["inputs: the schema must say `type: object` (with `properties:`)"]
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return ["inputs: `properties` must be a mapping of input names to their schemas"]
    return json_schema_problems(schema, "inputs")


def declared_names(schema: dict[str, Any] | None) -> list[str]:
    """The inputs a schema lists, in its order."""
    properties = (schema or {}).get("properties", {})
    return list(properties) if isinstance(properties, dict) else []


def with_defaults(schema: dict[str, Any] | None, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with each top-level property's ``default`` where it is not given."""
    properties = (schema or {}).get("properties", {})
    defaults = {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and "default" in prop and name not in given
    }
    return {**given, **defaults} if defaults else dict(given)


def input_problems(
    schema: dict[str, Any] | None, inputs: dict[str, Any], max_bytes: int
) -> list[str]:
    """Every way ``inputs`` (defaults applied) fail the plan's schema, one line each."""
    shape_problem = _shape_problem(inputs, max_bytes)
    if shape_problem:
        return [shape_problem]
    if schema is None:
        return [_undeclared(name, []) for name in inputs]
    from dagwright.json_schemas import schema_errors, schema_validator

    validator = schema_validator(_closed(schema))
    errors = sorted(schema_errors(validator, inputs), key=lambda e: list(e.absolute_path))
    return [line for error in errors for line in _describe(error, schema)]


def check_inputs(
    schema: dict[str, Any] | None, given: dict[str, Any] | None, max_bytes: int
) -> dict[str, Any]:
    """The run's inputs: ``given`` with the schema's defaults, checked (RunInputError
    with every problem otherwise)."""
    if given is not None and not isinstance(given, dict):
        found = type(given).__name__
        raise RunInputError([f"inputs are a mapping of names to values, not {found}"])
    inputs = with_defaults(schema, given or {})
    problems = input_problems(schema, inputs, max_bytes)
    if problems:
        raise RunInputError(problems)
    return inputs


def _shape_problem(inputs: dict[str, Any], max_bytes: int) -> str | None:
    try:
        shape = json_shape(inputs)
    except ValueError as exc:
        return f"inputs {exc}"
    if shape.depth > MAX_INPUTS_DEPTH:
        return f"inputs are nested {shape.depth} levels deep; the limit is {MAX_INPUTS_DEPTH}"
    if shape.size_bytes > max_bytes:
        return (
            f"inputs are {shape.size_bytes} bytes of JSON; the limit is {max_bytes} "
            "(DAGWRIGHT_MAX_PARAMS_BYTES): pass large data as a file a node reads"
        )
    return None


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, refusing undeclared inputs unless it says what to do with them."""
    if "additionalProperties" in schema or "unevaluatedProperties" in schema:
        return schema
    return {**schema, "additionalProperties": False}


def _describe(error: SchemaMismatch, schema: dict[str, Any]) -> list[str]:
    """One jsonschema error as lines naming the input: ``input 'n': 'abc' is not of type
    'integer'``, ``input 'topic' is required``."""
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        required: Any = error.validator_value
        missing = [name for name in required if name not in error.instance]
        return [f"input {_named(path, name)!r} is required" for name in missing]
    if error.validator == "additionalProperties" and not path:
        declared = declared_names(schema)
        given = list(error.instance) if isinstance(error.instance, dict) else []
        return [_undeclared(name, declared) for name in given if name not in declared]
    message = error.message
    if len(message) > SHOWN_VALUE_CHARS * 2:
        message = message[: SHOWN_VALUE_CHARS * 2] + "…"
    where = _named(path[:-1], path[-1]) if path else "inputs"
    return [f"input {where!r}: {message}"]


def _named(parents: Iterable[Any], name: Any) -> str:
    return ".".join(str(part)[:60] for part in [*parents, name])


def _undeclared(name: str, declared: list[str]) -> str:
    takes = f"it takes {', '.join(declared)}" if declared else "it declares no inputs"
    return f"input {str(name)[:60]!r} is not an input of this plan ({takes})"


def parse_input_pairs(pairs: Iterable[str], schema: dict[str, Any] | None) -> dict[str, Any]:
    """``--input key=value`` texts as inputs: the value as JSON when it parses, else as
    text; as text anyway where the schema types the input as a string (``--input
    zip=01234`` stays ``"01234"``). InputError for a text without ``=``."""
    inputs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"--input takes key=value, not {pair[:SHOWN_VALUE_CHARS]!r}")
        inputs[key] = input_value(text, _declared_type(schema, key))
    return inputs


def input_value(text: str, declared_type: Any) -> Any:
    """One CLI value: text for a ``string`` input, else JSON if it parses, else text."""
    if declared_type == "string" or declared_type == ["string"]:
        return text
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: kept as text


def _declared_type(schema: dict[str, Any] | None, key: str) -> Any:
    properties = (schema or {}).get("properties", {})
    prop = properties.get(key) if isinstance(properties, dict) else None
    return prop.get("type") if isinstance(prop, dict) else None


@dataclass(frozen=True)
class BoundPlan:
    """A plan with its run's inputs in place: what a run stores and runs."""

    plan: Plan
    inputs: dict[str, Any]


def bind_inputs(plan: Plan, given: dict[str, Any] | None, max_bytes: int) -> BoundPlan:
    """Check ``given`` against the plan's ``inputs:`` schema, fill in its defaults and
    put the values in the plan's templates. PlanError for problems of the plan itself (its
    schema, its templates), RunInputError for problems of the inputs: one line each."""
    if plan.inputs is None and not given and not _mentions_inputs(plan):
        return BoundPlan(plan, {})  # most plans: nothing to do
    declared = declared_names(plan.inputs)
    problems = schema_problems(plan.inputs) + template_problems(plan, declared)
    if problems:
        raise PlanError(problems)
    inputs = check_inputs(plan.inputs, given, max_bytes)
    return BoundPlan(substituted(plan, inputs), inputs)


def _mentions_inputs(plan: Plan) -> bool:
    return any(
        LOOKS_LIKE_REFERENCE.search(text) for node in plan.nodes for _, text in template_texts(node)
    )
