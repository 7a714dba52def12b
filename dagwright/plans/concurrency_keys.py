"""Per-key concurrency limits (a plan's ``concurrency: {key: "{{ inputs.customer }}",
limit: 2}``, runs per key; a node's, nodes per key): the key rendered from a run's
inputs, with the templates of ``input_templates`` (the same ``{{ inputs.<name>[.<key>]
}}`` form, nothing else).

The rendered key names the runs that share the limit, and it is what people read in
"waiting for concurrency key customer=acme": a key that is one reference alone is shown
as ``<name>=<value>``, any other as the text it renders to.
"""

from __future__ import annotations

import json
from typing import Any

from dagwright.errors import PlanError, RunInputError
from dagwright.models import ConcurrencyKey, Plan
from dagwright.plans.input_templates import LOOKS_LIKE_REFERENCE, REFERENCE

MAX_KEY_CHARS = 200  # of a rendered key: it is part of Redis key names and of every view


def rendered_key(concurrency: ConcurrencyKey, inputs: dict[str, Any], declared: list[str]) -> str:
    """The key of a run with ``inputs``: PlanError for a malformed template or one naming
    an input the plan does not declare, RunInputError for a value the run lacks or a key
    longer than MAX_KEY_CHARS."""
    template = concurrency.key
    for found in LOOKS_LIKE_REFERENCE.finditer(template):
        match = REFERENCE.fullmatch(found.group(0))
        if match is None or match.group(1).split(".")[0] not in declared:
            raise PlanError(
                [
                    f"concurrency key: {found.group(0)[:80]!r} names no input of the plan "
                    "(only {{ inputs.<name> }} of its `inputs:`)"
                ]
            )
    whole = REFERENCE.fullmatch(template.strip())
    text = REFERENCE.sub(lambda match: _text(_lookup(match.group(1), inputs)), template)
    key = f"{whole.group(1)}={text}" if whole else text
    if len(key) > MAX_KEY_CHARS:
        raise RunInputError(
            [f"the concurrency key renders to {len(key)} characters; the limit is {MAX_KEY_CHARS}"]
        )
    return key


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _lookup(dotted: str, inputs: dict[str, Any]) -> Any:
    value: Any = inputs
    for name in dotted.split("."):
        if not isinstance(value, dict) or name not in value:
            raise RunInputError(
                [
                    f"the concurrency key uses {{{{ inputs.{dotted[:80]} }}}}, and the run's "
                    f"inputs have no {name[:60]!r} (give it, or a default in `inputs:`)"
                ]
            )
        value = value[name]
    return value


def with_rendered_node_keys(plan: Plan, inputs: dict[str, Any], declared: list[str]) -> Plan:
    """The plan with each node's ``concurrency.key`` rendered from the run's inputs (the
    stored plan holds values, not templates); the plan itself if no node has one."""
    if not any(node.concurrency for node in plan.nodes):
        return plan
    nodes = [
        node.model_copy(
            update={
                "concurrency": node.concurrency.model_copy(
                    update={"key": rendered_key(node.concurrency, inputs, declared)}
                )
            }
        )
        if node.concurrency
        else node
        for node in plan.nodes
    ]
    return plan.model_copy(update={"nodes": nodes})
