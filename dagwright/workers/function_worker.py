"""The ``function`` worker type: calls a registered Python function.

This makes dagwright a plain DAG runner too, and is what tests and benchmarks use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dagwright.errors import PermanentError
from dagwright.keys import function_queue
from dagwright.models import Node
from dagwright.workers.context import NodeContext
from dagwright.workers.function_registry import FunctionRegistry
from dagwright.workers.registry import WorkerType

FUNCTION_TYPE = "function"


def function_worker_type(
    functions: FunctionRegistry, unregistered: Callable[[str], str] | None = None
) -> WorkerType:
    """The ``function`` type calling ``functions``; ``unregistered``: the problem of a
    plan naming a function not among them (default: where to import it here)."""

    def check_node(node: Node) -> list[str]:
        if not node.function:
            return ["a function node needs `function: <name>` (a registered function)"]
        registered = functions.get(node.function)
        if registered is None:
            return [(unregistered or not_imported_here(functions))(node.function)]
        return registered.params_problems(node.params)

    def run(ctx: NodeContext, node: Node) -> Any:
        registered = functions.get(node.function or "")
        if registered is None:
            raise PermanentError(
                f"function {node.function!r} is not registered in this worker; start workers "
                "with --import <module> (or DAGWRIGHT_IMPORTS) naming the module defining it"
            )
        return registered.call(node.params, ctx)

    def own_queue_of(node: Node) -> str | None:
        registered = functions.get(node.function or "")
        if registered is None or registered.queue is None:
            return None
        return function_queue(registered.queue)

    return WorkerType(
        name=FUNCTION_TYPE,
        kind="function",
        description="Calls a registered Python function with the node's params and its inputs.",
        run=run,
        check_node=check_node,
        own_queue_of=own_queue_of,
    )


def not_imported_here(functions: FunctionRegistry) -> Callable[[str], str]:
    """The problem of a function this process has not registered (no stack asked)."""

    def problem(name: str) -> str:
        return (
            f"function {name!r} is not registered; registered: "
            f"{', '.join(functions.names())}. If it is yours, pass --import <module> "
            "or set DAGWRIGHT_IMPORTS"
        )

    return problem
