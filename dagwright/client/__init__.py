"""The Python client: submit plans, follow runs, fetch results, cancel.

::

    from dagwright import Client, load_plan

    client = Client()                          # Settings() from DAGWRIGHT_* / dagwright.toml
    run = client.submit(load_plan("examples/plans/diamond.yaml"))
    print(run.result(timeout=60))              # waits; raises RunFailedError if it failed

``Client`` holds the runs; ``client.dlq``, ``client.schedules``, ``client.approvals`` and
``client.tokens`` (the HTTP API's tokens) are sub-clients over the same runtime.
``plan_goal`` plans a goal without Redis or a run. ``AsyncClient`` has the run
methods as coroutines, for asyncio applications.

Rejected: one facade with every domain's methods (``dlq_list``, ``add_schedule``...): 38
methods in one class, and every caller of one domain read past the other four.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dagwright.client.approvals import ApprovalClient
    from dagwright.client.async_runs import AsyncClient, AsyncRunHandle
    from dagwright.client.dead_letters import DeadLetterClient
    from dagwright.client.handle import RunHandle, result_of
    from dagwright.client.planning import PlannedGoal, plan_goal
    from dagwright.client.runs import Client
    from dagwright.client.schedules import ScheduleClient, ScheduleInfo
    from dagwright.client.tokens import TokenClient

# Loaded on first use (PEP 562): `dagwright status` needs ``Client``, not the planner
# (``plan_goal``) nor the schedules, dead letters and approvals.
_LAZY = {
    "ApprovalClient": "dagwright.client.approvals",
    "AsyncClient": "dagwright.client.async_runs",
    "AsyncRunHandle": "dagwright.client.async_runs",
    "Client": "dagwright.client.runs",
    "DeadLetterClient": "dagwright.client.dead_letters",
    "PlannedGoal": "dagwright.client.planning",
    "RunHandle": "dagwright.client.handle",
    "ScheduleClient": "dagwright.client.schedules",
    "ScheduleInfo": "dagwright.client.schedules",
    "TokenClient": "dagwright.client.tokens",
    "plan_goal": "dagwright.client.planning",
    "result_of": "dagwright.client.handle",
}


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


__all__ = [
    "ApprovalClient",
    "AsyncClient",
    "AsyncRunHandle",
    "Client",
    "DeadLetterClient",
    "PlannedGoal",
    "RunHandle",
    "ScheduleClient",
    "ScheduleInfo",
    "TokenClient",
    "plan_goal",
    "result_of",
]
