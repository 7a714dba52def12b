"""How an agent's structured answer is given and checked: the result tool and its check.

A type with an ``output_model`` (the reviewer, the planner) takes its answer through a
tool whose input schema is the model's, validated by pydantic and then by the type's
``check_output``. A node with an ``output_schema`` takes it through the same tool with
that JSON Schema instead, validated by ``json_schemas`` (Draft 2020-12, the dialect the
Messages API's ``input_schema`` follows; nothing fetched, patterns in linear time).
Either way a mismatch goes back to the model as a failed call of the tool, saying what
is wrong, and counts toward the type's ``max_tool_errors``: bounded re-asks, then the
node fails for good.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import ValidationError as SchemaMismatch
from pydantic import ValidationError

from dagwright.json_schemas import schema_errors, schema_problems, schema_validator
from dagwright.models import Node
from dagwright.workers.agent_prompt import final_answer_schema
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.signatures import describe_validation_error

MAX_SHOWN_MISMATCHES = 5
ANSWER_DESCRIPTION = "Give your final result, in exactly this structure. Call it once, last."

Check = Callable[[dict[str, Any]], tuple[Any, list[str]]]


@dataclass(frozen=True)
class AnswerContract:
    """The result tool a node's answer is given through, and how an answer is checked."""

    tool_name: str
    definition: dict[str, Any]
    check: Check
    """An answer's output (JSON) and its problems (none: accepted)."""


def answer_contract(spec: AgentSpec, node: Node) -> AnswerContract | None:
    """The node's contract: its ``output_schema``, else its type's ``output_model``; None
    when the answer is free text."""
    if node.output_schema is not None:
        definition = {
            "name": spec.final_tool,
            "description": ANSWER_DESCRIPTION,
            "input_schema": node.output_schema,
        }
        return AnswerContract(spec.final_tool, definition, schema_check(node.output_schema))
    if spec.output_model is not None:
        definition = final_answer_schema(spec.output_model, spec.final_tool)
        return AnswerContract(spec.final_tool, definition, model_check(spec))
    return None


def schema_check(schema: dict[str, Any]) -> Check:
    validator = schema_validator(schema)

    def check(answer: dict[str, Any]) -> tuple[Any, list[str]]:
        mismatches = sorted(schema_errors(validator, answer), key=lambda error: list(error.path))
        if not mismatches:
            return answer, []
        shown = "; ".join(mismatch_words(m) for m in mismatches[:MAX_SHOWN_MISMATCHES])
        return None, [f"it does not match the schema: {shown}"]

    return check


def mismatch_words(error: SchemaMismatch) -> str:
    """``at input.sources.0: 'url' is a required property``."""
    where = ".".join(["input", *(str(part) for part in error.path)])
    return f"at {where}: {error.message}"


def model_check(spec: AgentSpec) -> Check:
    assert spec.output_model is not None
    output_model = spec.output_model

    def check(answer: dict[str, Any]) -> tuple[Any, list[str]]:
        try:
            output = output_model.model_validate(answer)
        except ValidationError as exc:
            return None, [
                f"it does not match the schema: {describe_validation_error(exc, 'input')}"
            ]
        problems = spec.check_output(output) if spec.check_output else []
        return output.model_dump(mode="json"), problems

    return check


def output_schema_problems(schema: dict[str, Any]) -> list[str]:
    """What is wrong with a node's ``output_schema`` (empty: usable as a tool's input
    schema): not a JSON Schema ``json_schemas`` takes (a ``$ref`` outside it, a pattern
    RE2 cannot run, too big), or not of an object (the API takes only those)."""
    problems = schema_problems(schema, "output_schema")
    if problems:
        return problems
    if schema.get("type") != "object":
        return ["`output_schema` must describe a JSON object (`type: object`)"]
    return []
