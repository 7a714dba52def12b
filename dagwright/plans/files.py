"""Plans from files (YAML or JSON) and from dicts, with errors a person can act on.

Reading a file in bounded memory is ``documents``'s; the limits that depend on settings
(sizes, node counts) are checked by ``validation``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dagwright.errors import InputError, PlanError
from dagwright.models import Plan
from dagwright.plans.documents import parse_plan_text, read_plan_text
from dagwright.settings import Settings
from dagwright.shown_ids import shown_id

FILE_SIZE_SETTING = "DAGWRIGHT_MAX_PLAN_FILE_BYTES"


def default_max_file_bytes() -> int:
    """The default of ``settings.limits.max_plan_file_bytes``, for callers without settings."""
    default: int = Settings.flat_field("max_plan_file_bytes").default
    return default


def load_plan(path: str | Path, *, max_bytes: int | None = None) -> Plan:
    """Read a plan file: ``.json`` as JSON, anything else as YAML. ``max_bytes``: the
    largest file read (default: that of ``settings.limits.max_plan_file_bytes``)."""
    source, path = str(path), Path(path)
    limit = default_max_file_bytes() if max_bytes is None else max_bytes
    try:
        text = read_plan_text(path, limit, FILE_SIZE_SETTING)
        data = parse_plan_text(text, json_file=path.suffix.lower() == ".json")
    except FileNotFoundError:
        raise PlanError([f"no such plan file: {source}"]) from None
    except PlanError as exc:
        raise PlanError(exc.problems, source=source) from None
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


def coerce_plan(
    plan: Plan | dict[str, Any] | str | Path, *, max_file_bytes: int | None = None
) -> Plan:
    """A plan as a caller gives it: a Plan, its dict, or the path of a plan file."""
    if isinstance(plan, Plan):
        return plan
    if isinstance(plan, dict):
        return parse_plan(plan)
    if isinstance(plan, str | Path):
        return load_plan(plan, max_bytes=max_file_bytes)
    raise PlanError([f"a plan is a Plan, a dict or a file path, not {type(plan).__name__}"])


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
            parts.append(str(part)[:60])  # a key of hostile input may be of any length
    return ".".join(parts) or "plan"


def _node_name(node_id: object, index: int) -> str:
    return f"node {shown_id(node_id)!r}" if isinstance(node_id, str) else f"nodes[{index}]"


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field (check its spelling)"
    if error["type"] == "string_pattern_mismatch" and _names_a_node(error["loc"]):
        given = shown_id(str(error["input"]))
        return f"{given!r} is not a valid id: use lowercase letters, digits, _ and -"
    return " ".join(str(error["msg"]).split())


def _names_a_node(loc: tuple[Any, ...]) -> bool:
    """Whether a field's location is a node id (its own, a dependency, an output)."""
    return bool({"id", "depends_on", "output"} & {part for part in loc if isinstance(part, str)})


def load_inputs_file(path: str | Path, *, max_bytes: int) -> dict[str, Any]:
    """A run's inputs from a file (``--inputs FILE``): a mapping, in JSON (``.json``) or
    YAML, read as safely as a plan file and at most ``max_bytes`` (that of params)."""
    source, path = str(path), Path(path)
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InputError(
                f"{source}: the inputs file is over {max_bytes} bytes, the limit "
                "(DAGWRIGHT_MAX_PARAMS_BYTES): pass large data as a file a node reads"
            )
        inputs = parse_plan_text(data.decode("utf-8"), json_file=path.suffix.lower() == ".json")
    except FileNotFoundError:
        raise InputError(f"no such inputs file: {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the inputs file {source}: {exc}") from None
    except PlanError as exc:
        raise InputError(f"{source}: {exc.summary()}") from None
    if not isinstance(inputs, dict):
        found = type(inputs).__name__ if inputs is not None else "nothing"
        raise InputError(f"{source}: inputs are a mapping of names to values; found {found}")
    return inputs
