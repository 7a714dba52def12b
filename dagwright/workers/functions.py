"""Registered functions: what ``function`` nodes call.

A function's keyword parameters are its node's ``params``, checked against the signature
by a pydantic model built from it (so a plan with wrong params is refused before it runs,
and the planner can be shown a JSON schema). Two parameter names are reserved: ``inputs``
receives the outputs of the node's dependencies keyed by node id, in ``depends_on`` order,
and ``ctx`` receives the ``NodeContext``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from dagwright.errors import PermanentError
from dagwright.workers.context import NodeContext

RESERVED_PARAMS = frozenset({"inputs", "ctx"})


@dataclass(frozen=True)
class RegisteredFunction:
    name: str
    func: Callable[..., Any]
    params_model: type[BaseModel]
    wants_inputs: bool
    wants_ctx: bool

    @property
    def description(self) -> str:
        doc = inspect.getdoc(self.func) or ""
        return doc.splitlines()[0] if doc else ""

    def params_problems(self, params: dict[str, Any]) -> list[str]:
        try:
            self.params_model.model_validate(params)
        except ValidationError as exc:
            return [f"function {self.name!r}: {describe_validation_error(exc, 'params')}"]
        return []

    def call(self, params: dict[str, Any], ctx: NodeContext) -> Any:
        try:
            validated = self.params_model.model_validate(params)
        except ValidationError as exc:
            raise PermanentError(describe_validation_error(exc, "params")) from exc
        kwargs = {name: getattr(validated, name) for name in type(validated).model_fields}
        kwargs.update(getattr(validated, "model_extra", None) or {})
        if self.wants_inputs:
            kwargs["inputs"] = ctx.inputs
        if self.wants_ctx:
            kwargs["ctx"] = ctx
        result = self.func(**kwargs)
        if inspect.isawaitable(result):
            return asyncio.run(_await(result))
        return result


async def _await(awaitable: Any) -> Any:
    return await awaitable


class FunctionRegistry:
    def __init__(self) -> None:
        self._functions: dict[str, RegisteredFunction] = {}

    def register(self, func: Callable[..., Any], name: str | None = None) -> RegisteredFunction:
        registered = describe_function(func, name or func.__name__)
        existing = self._functions.get(registered.name)
        if existing is not None and existing.func is not func:
            raise ValueError(f"a different function is already registered as {registered.name!r}")
        self._functions[registered.name] = registered
        return registered

    def get(self, name: str) -> RegisteredFunction | None:
        return self._functions.get(name)

    def names(self) -> list[str]:
        return sorted(self._functions)


def describe_function(func: Callable[..., Any], name: str) -> RegisteredFunction:
    """Build the params model of a function from its signature."""
    signature = inspect.signature(func)
    fields: dict[str, Any] = {}
    accepts_extra = False
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_extra = True
        elif param.kind is inspect.Parameter.VAR_POSITIONAL or param.name in RESERVED_PARAMS:
            continue
        else:
            annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (annotation, default)
    config = ConfigDict(extra="allow" if accepts_extra else "forbid", arbitrary_types_allowed=True)
    model = create_model(f"{name}_params", __config__=config, **fields)
    return RegisteredFunction(
        name=name,
        func=func,
        params_model=model,
        wants_inputs="inputs" in signature.parameters,
        wants_ctx="ctx" in signature.parameters,
    )


def describe_validation_error(exc: ValidationError, root: str) -> str:
    """pydantic's errors as one line: ``params.sep: Input should be a valid string``."""
    parts = []
    for error in exc.errors():
        location = ".".join(str(part) for part in (root, *error["loc"]))
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)
