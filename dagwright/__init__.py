"""dagwright: goals become dependency DAGs of subtasks, run by typed workers on Celery.

The public API is what ``__all__`` lists; everything else is internal.

The errors and models are imported with the package; the rest on first use (PEP 562), so
``import dagwright`` costs no Redis client, worker registry or Celery: a script that only
builds plans, and every ``dagwright`` command, starts quickly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.errors import (
    BrokerUnavailableError,
    ConfigurationError,
    DagwrightError,
    InputError,
    NodeError,
    PermanentError,
    PlanError,
    RetryableError,
    RunCancelledError,
    RunError,
    RunFailedError,
    RunNotFinishedError,
    UnknownRunError,
)
from dagwright.lazy_exports import lazy_exports
from dagwright.models import (
    Budget,
    Event,
    Node,
    NodeState,
    NodeStatus,
    Plan,
    RetryPolicy,
    RunState,
    RunStatus,
)

if TYPE_CHECKING:
    from dagwright.client import AsyncClient, Client, RunHandle
    from dagwright.plans.builder import PlanBuilder
    from dagwright.plans.files import load_plan
    from dagwright.settings import Settings
    from dagwright.workers import (
        AgentSpec,
        NodeContext,
        function,
        tool,
        worker_type,
    )

__version__ = "0.1.0"

_LAZY = {
    "AgentSpec": "dagwright.workers",
    "AsyncClient": "dagwright.client",
    "Client": "dagwright.client",
    "NodeContext": "dagwright.workers",
    "PlanBuilder": "dagwright.plans.builder",
    "RunHandle": "dagwright.client",
    "Settings": "dagwright.settings",
    "function": "dagwright.workers",
    "load_plan": "dagwright.plans.files",
    "tool": "dagwright.workers",
    "worker_type": "dagwright.workers",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "AgentSpec",
    "AsyncClient",
    "BrokerUnavailableError",
    "Budget",
    "Client",
    "ConfigurationError",
    "DagwrightError",
    "Event",
    "InputError",
    "Node",
    "NodeContext",
    "NodeError",
    "NodeState",
    "NodeStatus",
    "PermanentError",
    "Plan",
    "PlanBuilder",
    "PlanError",
    "RetryPolicy",
    "RetryableError",
    "RunCancelledError",
    "RunError",
    "RunFailedError",
    "RunHandle",
    "RunNotFinishedError",
    "RunState",
    "RunStatus",
    "Settings",
    "UnknownRunError",
    "__version__",
    "function",
    "load_plan",
    "tool",
    "worker_type",
]
