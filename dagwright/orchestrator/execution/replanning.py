"""Re-planning a failed branch of a goal run: a planner node, in the failed node's place,
asked to plan around the failure with what the run has completed.

What it reads of the run comes through the run store (``RunStore.replan_reading``);
fail.lua checks the re-plan count again, atomically, and names the new planner.
"""

from __future__ import annotations

from dagwright.models import BLOCKED_BY_A_FAILURE, Node, NodeStatus
from dagwright.orchestrator.runstate.machine import REPLAN_ID_PLACEHOLDER, Replanner
from dagwright.orchestrator.runstate.replan_reading import ReplanReading
from dagwright.orchestrator.runtime import Runtime
from dagwright.planning.planner import PLANNER_TYPE, REPLAN_NODE_PREFIX, PlanRequest


def replanner_for(runtime: Runtime, run_id: str, failed: Node, error: str) -> Replanner | None:
    """A re-planner for the branch of ``failed``, if the run re-plans."""
    if failed.id.startswith("_") or failed.type == PLANNER_TYPE:
        return None
    if failed.map is not None:  # a map or its child: replayed from the DLQ, not re-planned
        return None
    reading = runtime.store.replan_reading(run_id)
    if reading is None:
        return None
    branch = failed_branch(reading, failed.id)
    request = replan_request(reading, failed.id, error, branch).model_copy(
        update={"replace": runtime.store.node_specs(run_id, branch)}
    )
    # It depends on the completed nodes the branch used: their outputs reach it as inputs.
    template = Node(
        id=REPLAN_ID_PLACEHOLDER,
        type=PLANNER_TYPE,
        params=request.model_dump(exclude_defaults=True),
        depends_on=used_by(reading, branch),
        priority=reading.priority,
    )
    return Replanner(
        id_prefix=REPLAN_NODE_PREFIX,
        spec_template=template.model_dump_json(exclude_defaults=True),
        dispatch=runtime.dispatch_for(template),
    )


def failed_branch(reading: ReplanReading, failed: str) -> list[str]:
    """``failed`` and the pending nodes after it. Handlers (nodes with a run_if rule) are
    not in the branch: the failure does not block them, it is what they run for (and it is
    not replaced before they run). A none_failed node is blocked by it, as a plain node
    is: it is in the branch."""
    handlers = {node for node, rule in reading.run_if.items() if rule not in BLOCKED_BY_A_FAILURE}
    return [failed, *reading.pending_after(failed, handlers)]


def completed_nodes(reading: ReplanReading) -> list[str]:
    """The plan's nodes (not the run's own, "_"-named) that succeeded."""
    return [
        node
        for node, state in reading.states.items()
        if not node.startswith("_") and state == NodeStatus.SUCCEEDED.value
    ]


def used_by(reading: ReplanReading, branch: list[str]) -> list[str]:
    """The completed nodes the branch depends on, sorted."""
    completed = set(completed_nodes(reading))
    return sorted(
        {dep for node in branch for dep in reading.deps.get(node, []) if dep in completed}
    )


def replan_request(
    reading: ReplanReading, failed: str, error: str, branch: list[str]
) -> PlanRequest:
    """The run's planning request, told what failed, what the run holds and what is open
    (the branch's specs, ``replace``, are added by the caller, from the store)."""
    mine = [node for node in reading.states if not node.startswith("_")]
    states = reading.states
    return PlanRequest.model_validate_json(reading.request_json).model_copy(
        update={
            "failed_node": failed,
            "error": error,
            "taken": sorted(states),
            "completed": sorted(completed_nodes(reading)),
            "open": sorted(
                n for n in mine if n not in branch and not NodeStatus(states[n]).is_final
            ),
            "run_outputs": reading.output_nodes,
        }
    )
