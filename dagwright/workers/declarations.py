"""Declaring functions, tools and worker types: marks, collected when the registry is built.

``@dagwright.function``, ``@dagwright.tool`` and ``@dagwright.worker_type(...)`` attach a
declaration to the decorated function and return it unchanged; an ``AgentSpec`` or a
``WorkerType`` bound to a module-level name is a declaration as it stands. Nothing is
registered at import time: ``dagwright.registry.build_registry(settings)`` imports the
modules named by ``DAGWRIGHT_IMPORTS`` / ``--import``, collects the declarations among
their top-level names (``declared_in``) and adds them to the registry it builds
(``add_declared``), functions and tools before the types that use them.

Rejected: decorators that register into a module-level registry (what dagwright did first,
and what Celery's ``shared_task`` does with its pending list). Every process then holds
whatever some import happened to register, two registries cannot be told apart in one
process (tests, an embedded stack beside a client), and each entry point had to remember
to import the plugins first. Temporal's ``@activity.defn`` marks the function the same way;
its worker is then given the list, here the module is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar, overload

from dagwright.errors import ConfigurationError
from dagwright.workers.agent_loop import AgentSpec
from dagwright.workers.agent_tools import unregistered
from dagwright.workers.builtin_agents import agent_worker_type
from dagwright.workers.context import NodeContext
from dagwright.workers.registry import WorkerRegistry, WorkerType
from dagwright.workers.tools.base import DEFAULT_MAX_OUTPUT_CHARS, DEFAULT_TIMEOUT_S

F = TypeVar("F", bound=Callable[..., Any])

DECLARATION_ATTRIBUTE = "__dagwright_declaration__"


@dataclass(frozen=True)
class FunctionDeclaration:
    """A function ``function`` nodes may call, by ``name``; on its own ``queue`` if given."""

    func: Callable[..., Any]
    name: str
    queue: str | None = None
    rate_limit: str | None = None  # "5/s": its nodes' starts over every worker (rates.py)


@dataclass(frozen=True)
class ToolDeclaration:
    """A tool agents may be given, by ``name``."""

    func: Callable[..., Any]
    name: str
    timeout_s: float
    max_output_chars: int
    carries_outside_content: bool = False


Declaration = FunctionDeclaration | ToolDeclaration | WorkerType | AgentSpec


def mark(target: F, declaration: FunctionDeclaration | ToolDeclaration | WorkerType) -> F:
    setattr(target, DECLARATION_ATTRIBUTE, declaration)
    return target


@overload
def function(
    func: F, /, *, name: str | None = None, queue: str | None = None, rate_limit: str | None = None
) -> F: ...


@overload
def function(
    *, name: str | None = None, queue: str | None = None, rate_limit: str | None = None
) -> Callable[[F], F]: ...


def function(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    queue: str | None = None,
    rate_limit: str | None = None,
) -> F | Callable[[F], F]:
    """Declare a function that ``function`` nodes can call by name (its own, or ``name``).

    Usable bare (``@function``), with a name (``@function(name="fetch")``), or on a queue
    of its own (``@function(queue="gpu")``: its nodes go to ``dw.function:gpu``, served by
    ``dagwright worker --type function:gpu``). Given an existing Celery task
    (``dagwright.function(my_task)``, the task unchanged), it declares the task's body
    under the task's name: the body runs in the dagwright worker, as a node.
    ``rate_limit="5/s"`` (``N/s``, ``N/m``, ``N/h``): at most that many of its nodes
    start per period over every worker; the others wait without holding a worker slot
    (``DAGWRIGHT_RATE_LIMITS`` may override it).
    """

    def declare(target: F) -> F:
        body, own_name = celery_task_body(target) or (target, target.__name__)
        return mark(target, FunctionDeclaration(body, name or own_name, queue, rate_limit))

    return declare(func) if func is not None else declare


def celery_task_body(target: object) -> tuple[Callable[..., Any], str] | None:
    """A Celery task's body (its ``run``: the decorated function, bound for ``bind=True``
    tasks) and its name, if ``target`` is a task; told by its ``apply_async`` and its name,
    without importing Celery. Rejected: a ``celery`` node type sending the task to the
    user's own app, which would need that app's broker, queues and result backend here."""
    if not callable(getattr(target, "apply_async", None)):
        return None
    name, run = getattr(target, "name", None), getattr(target, "run", None)
    if not isinstance(name, str) or not callable(run):
        return None
    return run, name


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    carries_outside_content: bool = False,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    carries_outside_content: bool = False,
) -> F | Callable[[F], F]:
    """Declare a tool agents may be given (its docstring's first line describes it).
    ``carries_outside_content``: what it returns comes from outside (web pages, files,
    other systems' answers) and reaches the model as delimited untrusted data."""

    def declare(target: F) -> F:
        declared = ToolDeclaration(
            target, name or target.__name__, timeout_s, max_output_chars, carries_outside_content
        )
        return mark(target, declared)

    return declare(func) if func is not None else declare


RunFunction = Callable[[NodeContext, Any], Any]


def worker_type(*, name: str, description: str) -> Callable[[RunFunction], RunFunction]:
    """Declare a worker type written in Python: ``def run(ctx, node) -> output``."""

    def declare(run: RunFunction) -> RunFunction:
        return mark(run, WorkerType(name=name, kind="custom", description=description, run=run))

    return declare


def declaration_of(value: object) -> Declaration | None:
    """What ``value`` declares, if anything: a marked function, an AgentSpec, a WorkerType."""
    if isinstance(value, FunctionDeclaration | ToolDeclaration | AgentSpec | WorkerType):
        return value
    if not callable(value):
        return None
    marked = getattr(value, DECLARATION_ATTRIBUTE, None)
    if isinstance(marked, FunctionDeclaration | ToolDeclaration | WorkerType):
        return marked
    return None


def declared_in(module: ModuleType) -> list[Declaration]:
    """The declarations among ``module``'s top-level names, each once, in definition order."""
    found = (declaration_of(value) for value in vars(module).values())
    unique = {id(declared): declared for declared in found if declared is not None}
    return list(unique.values())


def add_declared(registry: WorkerRegistry, declared: Iterable[object]) -> None:
    """Add what each of ``declared`` declares (a decorated function, an AgentSpec, a
    WorkerType) to ``registry``: functions and tools first, then the worker types, so an
    agent may name a tool declared below it."""
    declarations = [declaration_or_error(item) for item in declared]
    types_last = sorted(declarations, key=lambda item: isinstance(item, AgentSpec | WorkerType))
    for declaration in types_last:
        add_one(registry, declaration)


def declaration_or_error(item: object) -> Declaration:
    declaration = declaration_of(item)
    if declaration is None:
        raise ConfigurationError(
            f"{item!r} declares nothing: decorate it with @dagwright.function, @dagwright.tool "
            "or @dagwright.worker_type, or give an AgentSpec or a WorkerType"
        )
    return declaration


def add_one(registry: WorkerRegistry, declared: Declaration) -> None:
    if isinstance(declared, FunctionDeclaration):
        registry.functions.register(
            declared.func, declared.name, queue=declared.queue, rate_limit=declared.rate_limit
        )
    elif isinstance(declared, ToolDeclaration):
        registry.tools.register(
            declared.func,
            name=declared.name,
            timeout_s=declared.timeout_s,
            max_output_chars=declared.max_output_chars,
            carries_outside_content=declared.carries_outside_content,
        )
    elif isinstance(declared, AgentSpec):
        add_agent(registry, declared)
    else:
        registry.register_type(declared, declared_by=declared.run)


def add_agent(registry: WorkerRegistry, spec: AgentSpec) -> WorkerType:
    """Add an LLM worker type (its queue is ``dw.<name>``); its tools must be registered."""
    unknown = unregistered(spec.tools, registry.tools)
    if unknown:
        raise ConfigurationError(
            f"agent type {spec.name!r} names unknown tool(s) {', '.join(unknown)}: declare "
            f"them with @dagwright.tool; known: {', '.join(registry.tools.names())}"
        )
    return registry.register_type(agent_worker_type(spec, registry.tools), declared_by=spec)
