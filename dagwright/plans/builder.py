"""Plans built in Python: ``PlanBuilder`` and the JSON a built plan is written as."""

from __future__ import annotations

import json
from typing import Any

from dagwright.models import MapOver, Plan, RetryPolicy, RunIf
from dagwright.plans.files import parse_plan


class PlanBuilder:
    """Build a plan in Python::

        plan = PlanBuilder("Summarise two texts")
        left = plan.function("left", "concat", params={"parts": ["a b"]})
        right = plan.python("right", "print(3)")
        plan.agent("report", "writer", "Write a report.", depends_on=[left, right])
        run = client.submit(plan.build())

    Each method returns the node id, to pass in ``depends_on``. A plan taking inputs
    declares each with ``input`` (or gives the whole JSON Schema as ``inputs=``) and
    uses them as ``{{ inputs.<name> }}`` in params and instructions::

        plan = PlanBuilder("Greet someone")
        plan.input("name", "string", required=True)
        plan.input("times", "integer", default=1)
        plan.function("greet", "concat", params={"parts": ["hello", "{{ inputs.name }}"]})
        run = client.submit(plan.build(), inputs={"name": "Ada"})
    """

    def __init__(self, goal: str = "", *, inputs: dict[str, Any] | None = None) -> None:
        self.goal = goal
        self._nodes: list[dict[str, Any]] = []
        self._inputs = inputs

    def input(
        self,
        name: str,
        type: str | None = None,
        *,
        required: bool = False,
        description: str | None = None,
        **schema: Any,
    ) -> str:
        """Declare the input ``name``: its JSON Schema ``type`` (``string``, ``integer``,
        ``number``, ``boolean``, ``array``, ``object``), whether it is ``required``, and
        any other keyword of its schema (``default=``, ``enum=``...). Returns the name."""
        inputs = self._inputs or {"type": "object", "properties": {}}
        prop = {**_without_none({"type": type, "description": description}), **schema}
        inputs = {**inputs, "properties": {**inputs.get("properties", {}), name: prop}}
        if required:
            inputs["required"] = [*inputs.get("required", []), name]
        self._inputs = inputs
        return name

    def node(
        self, node_id: str, type: str, *, depends_on: list[str] | None = None, **fields: Any
    ) -> str:
        if "map" in fields:
            fields["map"] = _map_fields(fields["map"])
        self._nodes.append(
            {"id": node_id, "type": type, "depends_on": list(depends_on or []), **fields}
        )
        return node_id

    def function(
        self,
        node_id: str,
        function: str,
        *,
        params: dict[str, Any] | None = None,
        depends_on: list[str] | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float | None = None,
        run_if: RunIf | None = None,
        map: MapOver | dict[str, Any] | None = None,
    ) -> str:
        """A ``function`` node; ``run_if="any_failed"`` (or ``"all_done"``,
        ``"none_failed"``, ``"one_success"``, ``"always"``: a teardown that runs after a
        cancel or a run timeout too) makes it a handler of how its dependencies
        ended (see ``Node.run_if``). ``map={"over": node, "path": "companies"}`` runs it
        once per item of that node's list (see ``Node.map``; ``map_over`` builds one)."""
        return self.node(
            node_id,
            "function",
            depends_on=depends_on,
            function=function,
            params=params or {},
            retry=retry,
            timeout_s=timeout_s,
            run_if=run_if,
            map=map,
        )

    def python(
        self, node_id: str, code: str, *, depends_on: list[str] | None = None, **fields: Any
    ) -> str:
        return self.node(node_id, "python", depends_on=depends_on, code=code, **fields)

    def celery_task(
        self,
        node_id: str,
        task: str,
        *,
        kwargs: dict[str, Any] | None = None,
        depends_on: list[str] | None = None,
        **fields: Any,
    ) -> str:
        """A ``celery_task`` node: task ``task`` of your own Celery app
        (``DAGWRIGHT_CELERY_APP``), sent to your workers with ``kwargs`` (the node's
        ``params``); its result is the node's output."""
        params = kwargs or {}
        return self.node(
            node_id, "celery_task", depends_on=depends_on, task=task, params=params, **fields
        )

    def agent(
        self,
        node_id: str,
        type: str,
        instruction: str,
        *,
        depends_on: list[str] | None = None,
        **fields: Any,
    ) -> str:
        return self.node(node_id, type, depends_on=depends_on, instruction=instruction, **fields)

    def build(self, output: str | list[str] | None = None) -> Plan:
        """The plan, checked like a plan file (PlanError names what is wrong)."""
        nodes = [_without_none(node) for node in self._nodes]
        return parse_plan(
            _without_none(
                {"goal": self.goal, "output": output, "nodes": nodes, "inputs": self._inputs}
            )
        )


def plan_to_json(plan: Plan) -> str:
    """A plan as indented JSON, with the field names of plan files (defaults left out)."""
    return json.dumps(
        plan.model_dump(mode="json", exclude_defaults=True), indent=2, ensure_ascii=False
    )


def map_over(
    over: str, path: str | None = None, *, max_items: int | None = None, truncate: bool = False
) -> MapOver:
    """A node's ``map``: once per item of ``over``'s output (at ``path``, dotted keys)."""
    return MapOver(over=over, path=path, max_items=max_items, truncate=truncate)


def _map_fields(spec: MapOver | dict[str, Any] | None) -> dict[str, Any] | None:
    if isinstance(spec, MapOver):
        return spec.model_dump(exclude_defaults=True)
    return spec


def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}
