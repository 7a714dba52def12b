"""The model ids the installed ``anthropic`` SDK knows, read from its ``Model`` type.

Kept out of :mod:`dagwright.llm.anthropic` because the fake API needs the list without an
API client, and apart from :mod:`dagwright.llm.messages_api_rules` so that the rules stay
plain data. The SDK is imported inside the function: importing this module costs nothing.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import typing
from pathlib import Path


@functools.cache
def sdk_model_ids() -> frozenset[str]:
    """Every literal model id of ``anthropic.types.Model`` (a ``Literal[...] | str``)."""
    from anthropic.types import Model  # the SDK's own list, updated with each release

    return frozenset(_literals(Model))


def _literals(annotation: object) -> set[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return {value for value in typing.get_args(annotation) if isinstance(value, str)}
    found: set[str] = set()
    for argument in typing.get_args(annotation):
        found |= _literals(argument)
    return found


@functools.cache
def sdk_end_of_life() -> dict[str, str]:
    """The end-of-life date (as the SDK words it: "November 30th, 2026") of each model the
    installed SDK marks deprecated; empty if this SDK carries no such list.

    Read from the SDK's data file (``anthropic/_data/deprecated_models.py``, a private
    module: its own warning on each call reads it) without importing the SDK: a worker
    checks its models at start, and ``import anthropic`` costs seconds there, time in
    which the worker takes no task."""
    spec = importlib.util.find_spec("anthropic")  # a top-level package: not imported
    if spec is None or not spec.submodule_search_locations:
        return {}
    data = Path(next(iter(spec.submodule_search_locations))) / "_data" / "deprecated_models.py"
    try:
        tree = ast.parse(data.read_text())
    except (OSError, SyntaxError):
        return {}
    for statement in tree.body:
        if _assigns(statement, "DEPRECATED_MODELS"):
            found = ast.literal_eval(statement.value)  # type: ignore[attr-defined]
            if isinstance(found, dict):
                return {str(model): str(date) for model, date in found.items()}
    return {}


def _assigns(statement: ast.stmt, name: str) -> bool:
    """Whether ``statement`` is ``name = ...`` or ``name: T = ...``."""
    if isinstance(statement, ast.AnnAssign):
        targets: list[ast.expr] = [statement.target] if statement.value is not None else []
    elif isinstance(statement, ast.Assign):
        targets = statement.targets
    else:
        return False
    return any(isinstance(target, ast.Name) and target.id == name for target in targets)
