"""What ``--model`` and ``--set`` change in a suite's plan, to try a change without editing
files: ``--model M`` is the model of every agent node; ``--set NODE.FIELD=VALUE`` sets one
field of one node (``*`` for every node), e.g. ``--set write.instruction=@prompt.md`` or
``--set research.params.depth=3``. VALUE is read as YAML (``3``, ``[a, b]``, ``true``),
``@FILE`` as the file's text. The changed plan is validated like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagwright.errors import InputError
from dagwright.models import Plan

SETTABLE_FIELDS = frozenset(
    {"model", "instruction", "max_tokens", "timeout_s", "tools", "params", "code", "budget"}
)
MAX_VALUE_FILE_BYTES = 200_000
SET_SYNTAX = re.compile(
    r"^(?P<node>\*|[a-z0-9_-]{1,64})\.(?P<path>[A-Za-z0-9_.-]{1,200})=(?P<value>.*)$", re.S
)


@dataclass(frozen=True)
class FieldChange:
    """One ``--set``: the node (``*``: all), the field's path, the value."""

    node: str
    path: tuple[str, ...]
    value: Any
    text: str

    @classmethod
    def parse(cls, text: str) -> FieldChange:
        matched = SET_SYNTAX.match(text)
        if matched is None:
            raise InputError(
                f"--set {text[:60]!r}: write NODE.FIELD=VALUE (e.g. write.model=claude-opus-4-5)"
            )
        path = tuple(matched["path"].split("."))
        if path[0] not in SETTABLE_FIELDS:
            fields = ", ".join(sorted(SETTABLE_FIELDS))
            raise InputError(f"--set {text[:60]!r}: {path[0]!r} is not settable; fields: {fields}")
        if len(path) > 1 and path[0] not in {"params", "budget"}:
            raise InputError(f"--set {text[:60]!r}: only params and budget have keys")
        return cls(matched["node"], path, _value(matched["value"], text), text)


def _value(raw: str, text: str) -> Any:
    import yaml

    if raw.startswith("@"):
        return _file_text(Path(raw[1:]), text)
    try:
        return yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return raw  # not YAML: the text as it is


def _file_text(path: Path, text: str) -> str:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_VALUE_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"--set {text[:60]!r}: cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_VALUE_FILE_BYTES:
        raise InputError(f"--set {text[:60]!r}: {path} is over {MAX_VALUE_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"--set {text[:60]!r}: {path} is not UTF-8 text") from None


def changed_plan(
    plan: Plan, *, model: str | None, changes: list[FieldChange], agent_types: set[str]
) -> Plan:
    """``plan`` with ``model`` on its agent nodes and ``changes`` applied, validated."""
    from dagwright.plans.files import parse_plan

    if model is None and not changes:
        return plan
    data = plan.model_dump(mode="json", exclude_none=True)
    nodes = {node["id"]: node for node in data["nodes"]}
    if model is not None:
        for node in nodes.values():
            if node["type"] in agent_types:
                node["model"] = model
    for change in changes:
        _apply(change, nodes)
    return parse_plan(data, source="the plan as --model/--set changed it")


def _apply(change: FieldChange, nodes: dict[str, dict[str, Any]]) -> None:
    if change.node != "*" and change.node not in nodes:
        known = ", ".join(sorted(nodes))
        raise InputError(
            f"--set {change.text[:60]!r}: the plan has no node {change.node!r} ({known})"
        )
    for node_id, node in nodes.items():
        if change.node in ("*", node_id):
            target = node
            for key in change.path[:-1]:
                target = target.setdefault(key, {})
            target[change.path[-1]] = change.value
