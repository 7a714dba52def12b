"""Built-in functions, registered in every process: used by examples, tests and benchmarks."""

from __future__ import annotations

import json
from typing import Any

from dagwright.errors import PermanentError
from dagwright.workers.context import NodeContext
from dagwright.workers.function_registry import FunctionRegistry


def noop(**_: Any) -> None:
    """Do nothing and return null (benchmarks, placeholders)."""
    return None


def sleep(seconds: float = 1.0, ctx: NodeContext | None = None) -> float:
    """Wait ``seconds`` (stops early if the node is cancelled) and return them."""
    if ctx is not None and ctx.sleep(seconds):
        raise PermanentError("stopped: the node was cancelled or lost its lease")
    return seconds


def concat(
    parts: list[str] | None = None, sep: str = " ", inputs: dict[str, Any] | None = None
) -> str:
    """Join ``parts`` and then the inputs (in depends_on order) with ``sep``."""
    texts = list(parts or [])
    texts += [
        value if isinstance(value, str) else json.dumps(value) for value in (inputs or {}).values()
    ]
    return sep.join(texts)


def merge_json(
    objects: list[dict[str, Any]] | None = None, inputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Merge ``objects`` and then every input (each must be a JSON object); later keys win."""
    merged: dict[str, Any] = {}
    for obj in objects or []:
        merged.update(obj)
    for node_id, value in (inputs or {}).items():
        if not isinstance(value, dict):
            raise PermanentError(
                f"merge_json: input {node_id!r} is {type(value).__name__}, not an object"
            )
        merged.update(value)
    return merged


def fail(message: str = "failed on purpose") -> None:
    """Raise a permanent error with ``message`` (tests, DLQ drills)."""
    raise PermanentError(message)


def register_builtins(functions: FunctionRegistry) -> None:
    for func in (noop, sleep, concat, merge_json, fail):
        functions.register(func)
