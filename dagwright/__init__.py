"""dagwright: goals become dependency DAGs of subtasks, run by typed workers on Celery.

The public API is what ``__all__`` lists; everything else is internal.
"""

from dagwright.client import Client, RunHandle
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

__all__ = [
    "AgentSpec",
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
