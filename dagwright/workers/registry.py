"""The registry of worker types, and of the functions and tools they may use.

Plans may come from an LLM, so a node can only name something registered here, never an
import path. Users declare theirs (``@dagwright.function``, ``@dagwright.tool``,
``@dagwright.worker_type``, a module-level ``AgentSpec``; see ``declarations.py``) in a
module listed in ``DAGWRIGHT_IMPORTS`` / ``--import``, or in an installed
``dagwright.workers`` entry point. Each process builds its registry once, from its
settings (``dagwright.registry.build_registry``), and passes it on; none is global.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from dagwright.errors import ConfigurationError
from dagwright.keys import NODE_EXECUTE_TASK, function_queue, function_queue_type, queue_for
from dagwright.models import Node, RetryPolicy
from dagwright.settings import Settings
from dagwright.workers.context import NodeContext
from dagwright.workers.function_registry import FunctionRegistry
from dagwright.workers.tools.base import ToolRegistry

RunNode = Callable[[NodeContext, Node], Any]


@dataclass(frozen=True)
class WorkerType:
    """A kind of worker: what it does, its queue, its default retries, how it runs a node."""

    name: str
    kind: str
    description: str
    run: RunNode
    check_node: Callable[[Node], list[str]] = lambda node: []
    default_retry: RetryPolicy = field(default_factory=RetryPolicy)
    tools: tuple[str, ...] = ()
    model: str | None = None  # agents: None means settings.llm.default_model
    capabilities: Callable[[Settings], list[str]] | None = None
    """What the type can do in a deployment of these settings, one line per tool it is
    offered there (``name: what it does``): the planner's catalog and ``worker-types``
    show these rather than ``tools``, which may name tools the settings leave out."""
    internal: bool = False  # dagwright's own (the planner): not in plans, not in the catalog
    queue_name: str | None = None  # None: dw.<name>
    task: str = NODE_EXECUTE_TASK  # the Celery task its nodes are published as
    mcp_servers: tuple[str, ...] = ()  # agents: MCP servers whose tools it is offered
    skills: tuple[str, ...] = ()  # agents: the skills its system prompt lists
    own_queue_of: Callable[[Node], str | None] = lambda node: None
    """The queue of a node that does not go to the type's (a function declared with its
    own ``queue=``); None: the type's."""

    @property
    def queue(self) -> str:
        return self.queue_name or queue_for(self.name)

    def queue_of(self, node: Node) -> str:
        """The queue ``node`` is published to: its own if it has one, else the type's."""
        return self.own_queue_of(node) or self.queue


class WorkerRegistry:
    """Worker types by name, and the function table of the ``function`` type."""

    def __init__(self) -> None:
        self._types: dict[str, WorkerType] = {}
        self.functions = FunctionRegistry()
        self.tools = ToolRegistry()
        self._declared_by: dict[str, object] = {}  # type name -> what declared it
        self.served_elsewhere: Callable[[str], str] = lambda name: ""
        """Where a type not registered here is served, as a clause ("" if unknown): set
        on a client's registry widened by the live workers (control/live_registry.py)."""

    def register_type(self, worker_type: WorkerType, *, declared_by: object = None) -> WorkerType:
        """Add ``worker_type``; ConfigurationError if another has its name. The same
        declaration (``declared_by``: an AgentSpec, a run function) found twice, as when a
        module imports another's, is added once."""
        name = worker_type.name
        if name in self._types:
            if declared_by is not None and self._declared_by.get(name) is declared_by:
                return self._types[name]
            raise ConfigurationError(
                f"two worker types are named {name!r}: rename one (every type's name is unique)"
            )
        self._types[name] = worker_type
        self._declared_by[name] = declared_by
        return worker_type

    def copy(self, functions: FunctionRegistry) -> WorkerRegistry:
        """Another registry of the same types and tools, with ``functions`` as its
        function table (the ``function`` type still calls this one's until replaced)."""
        copied = WorkerRegistry()
        copied._types = dict(self._types)
        copied._declared_by = dict(self._declared_by)
        copied.functions = functions
        copied.tools = self.tools
        return copied

    def replace_type(self, worker_type: WorkerType, *, declaration: object = None) -> None:
        """Put ``worker_type`` in the place of the registered type of its name (as when
        MCP servers are attached to it), keeping what declared it unless ``declaration``
        (the AgentSpec it now runs, once the settings equipped it) is given."""
        self.get(worker_type.name)
        self._types[worker_type.name] = worker_type
        if declaration is not None:
            self._declared_by[worker_type.name] = declaration

    def declaration(self, name: str) -> object:
        """What declared type ``name`` (an AgentSpec for agents), None if unknown."""
        return self._declared_by.get(name)

    def get(self, name: str) -> WorkerType:
        try:
            return self._types[name]
        except KeyError:
            raise KeyError(f"no worker type {name!r} is registered in this process") from None

    def types(self, *, include_internal: bool = False) -> list[WorkerType]:
        found = [wt for wt in self._types.values() if include_internal or not wt.internal]
        return sorted(found, key=lambda wt: wt.name)

    def type_names(self) -> list[str]:
        """The types a plan may use."""
        return [wt.name for wt in self.types()]

    def served_queues(self) -> dict[str, str]:
        """What ``dagwright worker --type`` may name -> the Celery queue it consumes: each
        type a plan may use, and ``function:<queue>`` for each function queue."""
        served = {wt.name: wt.queue for wt in self.types()}
        for queue in self.functions.queues():
            served[function_queue_type(queue)] = function_queue(queue)
        return served

    def registered_type_names(self) -> list[str]:
        """Every type a plan could use here (the same: a run that allows fewer narrows it)."""
        return self.type_names()

    def unknown_type_hint(self, name: str) -> str:
        return self.served_elsewhere(name)

    def node_problems(self, node: Node) -> list[str]:
        worker_type = self.get(node.type)
        problems = worker_type.check_node(node)
        if worker_type.kind != "agent":
            problems += not_for_non_agents(node)
        return problems


# What only an agent node may set: its LLM calls' budget, model, answer and tools.
AGENT_ONLY_FIELDS = ("budget", "output_schema", "model", "max_tokens", "tools", "skills")


def not_for_non_agents(node: Node) -> list[str]:
    """The agent-only fields a node of a non-agent type sets, one problem each."""
    return [
        f"`{name}:` is for LLM calls, which a {node.type} node does not make"
        for name in AGENT_ONLY_FIELDS
        if getattr(node, name) is not None
    ]


def import_user_modules(modules: Iterable[str]) -> list[ModuleType]:
    """Import the modules that declare users' functions, tools and worker types.

    The current directory goes first on sys.path, as with ``celery -A``, so a module next
    to the plan file is found.
    """
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return [import_user_module(module) for module in modules]


def import_user_module(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot import {module!r} (from --import or DAGWRIGHT_IMPORTS): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
