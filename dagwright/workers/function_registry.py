"""Registered functions: what ``function`` nodes call.

A function's keyword parameters are its node's ``params``, checked against the signature
by a pydantic model built from it (so a plan with wrong params is refused before it runs,
and the planner can be shown a JSON schema). Two parameter names are reserved: ``inputs``
receives the outputs of the node's dependencies keyed by node id, in ``depends_on`` order,
and ``ctx`` receives the ``NodeContext``.

A function may have a queue of its own (``queue=``): its nodes are then published to
``dw.function:<queue>``, served by ``dagwright worker --type function:<queue>``, so CPU- or
GPU-heavy functions scale on their own workers and never take the default workers' slots.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dagwright.errors import ConfigurationError, PermanentError
from dagwright.rates import Rate
from dagwright.workers.context import NodeContext
from dagwright.workers.signatures import (
    accepts,
    describe_validation_error,
    first_doc_line,
    params_model,
    qualified_name,
    run_to_completion,
    validated_kwargs,
)

RESERVED_PARAMS = frozenset({"inputs", "run_inputs", "ctx"})

# A function queue's name: part of a Celery queue name and of a `--type` value.
QUEUE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


@dataclass(frozen=True)
class RegisteredFunction:
    name: str
    func: Callable[..., Any]
    params_model: type[BaseModel]
    wants_inputs: bool
    wants_ctx: bool
    wants_run_inputs: bool = False
    queue: str | None = None  # its own queue (``dw.function:<queue>``); None: ``dw.function``
    rate_limit: str | None = None  # "5/s": most starts of its nodes (dagwright/rates.py)

    @property
    def description(self) -> str:
        return first_doc_line(self.func)

    def params_problems(self, params: dict[str, Any]) -> list[str]:
        try:
            self.params_model.model_validate(params)
        except ValidationError as exc:
            return [f"function {self.name!r}: {describe_validation_error(exc, 'params')}"]
        return []

    def call(self, params: dict[str, Any], ctx: NodeContext) -> Any:
        try:
            kwargs = validated_kwargs(self.params_model, params)
        except ValidationError as exc:
            raise PermanentError(describe_validation_error(exc, "params")) from exc
        if self.wants_inputs:
            kwargs["inputs"] = ctx.inputs
        if self.wants_run_inputs:
            kwargs["run_inputs"] = ctx.run_inputs
        if self.wants_ctx:
            kwargs["ctx"] = ctx
        return run_to_completion(self.func(**kwargs))


class WorkerCheckedParams(BaseModel):
    """The params of a function that only the live workers have: any, checked by the
    worker that runs the node (its signature is not known here)."""

    model_config = ConfigDict(extra="allow")


def runs_in_workers(**params: Any) -> Any:
    """What a function known only from the live workers' capabilities does here: nothing
    (a worker that imported it runs its nodes)."""
    raise PermanentError("this function is registered in the live workers only, not here")


class FunctionRegistry:
    def __init__(self) -> None:
        self._functions: dict[str, RegisteredFunction] = {}

    def copy(self) -> FunctionRegistry:
        """Another table of the same functions, to add to without changing this one."""
        copied = FunctionRegistry()
        copied._functions = dict(self._functions)
        return copied

    def add_from_workers(self, name: str, queue: str | None) -> None:
        """Add ``name``, a function the live workers advertise and this process did not
        import: its nodes may be submitted (routed to ``queue``, their params checked by
        the worker that runs them), never called here."""
        self._functions[name] = RegisteredFunction(
            name=name,
            func=runs_in_workers,
            params_model=WorkerCheckedParams,
            wants_inputs=False,
            wants_ctx=False,
            queue=queue,
        )

    def register(
        self,
        func: Callable[..., Any],
        name: str | None = None,
        *,
        queue: str | None = None,
        rate_limit: str | None = None,
    ) -> RegisteredFunction:
        """Add ``func`` under ``name`` (its own by default), on its own ``queue`` if given,
        its nodes' starts limited to ``rate_limit`` if given."""
        name = name or func.__name__
        if rate_limit is not None:
            try:
                Rate.parse(rate_limit)
            except ValueError as exc:
                raise ConfigurationError(f"function {name!r}: rate_limit: {exc}") from None
        if queue is not None and not QUEUE_NAME.fullmatch(queue):
            raise ConfigurationError(
                f"function {name!r}: queue {queue!r} is not a queue name: use lowercase "
                "letters, digits, '_' and '-' (at most 40), e.g. queue=\"gpu\""
            )
        registered = RegisteredFunction(
            name=name,
            func=func,
            params_model=params_model(func, f"{name}_params", reserved=RESERVED_PARAMS),
            wants_inputs=accepts(func, "inputs"),
            wants_ctx=accepts(func, "ctx"),
            wants_run_inputs=accepts(func, "run_inputs"),
            queue=queue,
            rate_limit=rate_limit,
        )
        existing = self._functions.get(name)
        if existing is not None and existing.func is not func:
            raise ConfigurationError(
                f"two functions are named {name!r} ({qualified_name(existing.func)} and "
                f"{qualified_name(func)}): rename one with @dagwright.function(name=...)"
            )
        self._functions[name] = registered
        return registered

    def get(self, name: str) -> RegisteredFunction | None:
        return self._functions.get(name)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def queues(self) -> dict[str, list[str]]:
        """Each function queue (``queue=``) -> the functions declared on it, sorted."""
        found: dict[str, list[str]] = {}
        for name in self.names():
            queue = self._functions[name].queue
            if queue is not None:
                found.setdefault(queue, []).append(name)
        return dict(sorted(found.items()))
