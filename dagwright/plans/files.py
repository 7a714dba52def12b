"""Plans from files (YAML or JSON) and from dicts, with errors a person can act on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dagwright.errors import PlanError
from dagwright.models import Plan
from dagwright.shown_ids import shown_id


def load_plan(path: str | Path) -> Plan:
    """Read a plan file. YAML is a superset of JSON, so one parser reads both."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError([f"no such plan file: {source}"]) from None
    except OSError as exc:
        raise PlanError(
            [f"cannot read the plan file: {exc.strerror or exc}"], source=source
        ) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PlanError([f"not valid YAML/JSON: {_yaml_problem(exc)}"], source=source) from exc
    return parse_plan(data, source=source)


def parse_plan(data: Any, *, source: str | None = None) -> Plan:
    """Validate plain data (a dict, as read from JSON/YAML) into a Plan."""
    if not isinstance(data, dict):
        found = type(data).__name__ if data is not None else "nothing"
        raise PlanError([f"a plan is a mapping with `nodes:`; found {found}"], source=source)
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(describe_plan_errors(exc, data), source=source) from exc


def coerce_plan(plan: Plan | dict[str, Any] | str | Path) -> Plan:
    """A plan as a caller gives it: a Plan, its dict, or the path of a plan file."""
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, dict):
        return parse_plan(plan)
    return load_plan(plan)


def describe_plan_errors(exc: ValidationError, data: dict[str, Any]) -> list[str]:
    """pydantic errors as sentences naming the node by id, not by list index."""
    return [f"{_location(error['loc'], data)}: {_message(error)}" for error in exc.errors()]


def _location(loc: tuple[Any, ...], data: dict[str, Any]) -> str:
    parts: list[str] = []
    nodes = data.get("nodes")
    for i, part in enumerate(loc):
        if i == 1 and loc[0] == "nodes" and isinstance(part, int) and isinstance(nodes, list):
            node = nodes[part] if part < len(nodes) else None
            node_id = node.get("id") if isinstance(node, dict) else None
            parts[-1] = _node_name(node_id, part)
        else:
            parts.append(str(part))
    return ".".join(parts) or "plan"


def _node_name(node_id: object, index: int) -> str:
    return f"node {shown_id(node_id)!r}" if isinstance(node_id, str) else f"nodes[{index}]"


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field (check its spelling)"
    if error["type"] == "string_pattern_mismatch":
        given = shown_id(str(error["input"]))
        return f"{given!r} is not a valid id: use lowercase letters, digits, _ and -"
    return str(error["msg"])


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem
