"""The node and context the agent-loop tests use, over the public in-memory services."""

from __future__ import annotations

from typing import Any

from dagwright.models import Node
from dagwright.settings import Settings
from dagwright.testing import MemoryServices
from dagwright.workers.context import NodeContext

__all__ = ["MemoryServices", "agent_context", "agent_node"]


def agent_context(
    services: MemoryServices,
    *,
    inputs: dict[str, Any] | None = None,
    checkpoint: Any = None,
    settings: Settings | None = None,
) -> NodeContext:
    return services.context(inputs=inputs, checkpoint=checkpoint, settings=settings)


def agent_node(instruction: str = "Do the task.", type: str = "researcher") -> Node:
    return Node(id="agent", type=type, instruction=instruction)
