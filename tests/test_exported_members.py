"""The public API is exactly what __all__ lists (httpx's test_exported_members)."""

from __future__ import annotations

import dagwright


def test_public_api_is_pinned() -> None:
    assert dagwright.__all__ == sorted(dagwright.__all__)
    assert set(dagwright.__all__) == {
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
    }
    for name in dagwright.__all__:
        assert hasattr(dagwright, name), name
