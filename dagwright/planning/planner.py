"""The planner: an LLM turns a goal (or a failed branch) into a validated plan.

It is an agent like the others (``workers/agent_loop.py``) whose final tool is ``submit_plan``,
with the Plan model as input schema. A submitted plan is checked by the same pure
validator as plan files, against the catalog and the limits of the request, and within
the planner's bounds on what a model may set (``bounds.py``); every problem found goes
back to the model at once as a failed tool call, up to ``planner_max_repairs`` times,
then the run fails with the last problems. Running as a node (``_plan``, on ``dw.orchestrator``)
gives planning the claim, lease, checkpoint, retry and crash recovery of any node.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel, Field

from dagwright.errors import AgentToolErrorsError, PlanError, PlanningFailedError
from dagwright.keys import ORCHESTRATOR_QUEUE, PLAN_TASK
from dagwright.models import Budget, Node, Plan, RetryPolicy
from dagwright.planning.bounds import bounds_problems, bounds_summary, planned_types
from dagwright.planning.plan_language import PlannedPlan
from dagwright.plans.run_inputs import bind_inputs
from dagwright.plans.sizes import SizeLimits
from dagwright.plans.validation import PlanLimits, RunContext, validate_plan
from dagwright.settings import PlannerSettings, Settings
from dagwright.workers import AgentSpec, NodeContext, WorkerRegistry, WorkerType
from dagwright.workers.agent_loop import run_agent
from dagwright.workers.agent_prompt import DataBlock, DataGroup
from dagwright.workers.budgets import budget_words
from dagwright.workers.builtin_agents import prompt
from dagwright.workers.tools.policy import ToolPolicy

PLANNER_TYPE = "planner"
SYNTHESIS_TYPE = "writer"  # combines the results of a plan that names no output
PLAN_NODE_ID = "_plan"
REPLAN_NODE_PREFIX = "_replan-"
SUBMIT_PLAN_TOOL = "submit_plan"
PLANNER_RETRY = RetryPolicy(max_attempts=3, backoff_s=5, backoff_max_s=60)
MAX_SHOWN_INPUTS_CHARS = 4000  # of the run's inputs in the planning message


class PlanRequest(BaseModel):
    """What a planner node is asked: its params. A re-plan also names the failed part."""

    goal: str
    context: str = ""
    worker_types: list[str] | None = None
    max_nodes: int
    max_depth: int
    budget: Budget | None = None
    """The run's budget, told to the planner."""
    failed_node: str | None = None
    error: str = ""
    replace: list[dict[str, Any]] = Field(default_factory=list)
    """Specs of the failed node and the nodes that were waiting on it."""
    taken: list[str] = Field(default_factory=list)
    """Every id the run already uses."""
    completed: list[str] = Field(default_factory=list)
    """The run's nodes that succeeded: new nodes may depend on them."""
    open: list[str] = Field(default_factory=list)
    """The run's nodes still to finish outside the failed branch: new nodes may wait for them."""
    run_outputs: list[str] = Field(default_factory=list)
    inputs: dict[str, Any] | None = None
    """The run's inputs (``submit(goal=..., inputs=...)``): the plan may put them in its
    params and instructions as ``{{ inputs.<name> }}``."""

    @property
    def is_replan(self) -> bool:
        return self.failed_node is not None

    @property
    def replaced_ids(self) -> list[str]:
        return [spec["id"] for spec in self.replace]

    def run_context(self) -> RunContext:
        """The run a re-plan extends (empty for a first plan)."""
        return RunContext(
            completed=frozenset(self.completed),
            open=frozenset(self.open),
            taken=frozenset(self.taken),
        )

    def limits(self, settings: Settings) -> PlanLimits:
        """The limits of a planned plan: a planned node's timeout is bounded twice."""
        planner_bound = settings.planner.max_timeout_s < settings.limits.max_timeout_s
        return PlanLimits(
            max_nodes=self.max_nodes,
            max_nodes_read=settings.limits.max_nodes,
            max_timeout_s=min(settings.planner.max_timeout_s, settings.limits.max_timeout_s),
            max_depth=self.max_depth,
            source="--max-nodes / DAGWRIGHT_PLANNER_MAX_NODES",
            timeout_source=(
                "DAGWRIGHT_PLANNER_MAX_TIMEOUT_S" if planner_bound else "DAGWRIGHT_MAX_TIMEOUT_S"
            ),
            sizes=SizeLimits.of(settings),
            max_map_items=settings.limits.map_max_items,
        )


@dataclass(frozen=True)
class RestrictedCatalog:
    """The registered worker types a plan may use, optionally narrowed to a list."""

    registry: WorkerRegistry
    allowed: list[str] | None = None
    settings: Settings | None = None
    """The deployment's settings: each agent type is described by the tools they let it
    use (None: by the tools it names)."""

    def type_names(self) -> list[str]:
        names = self.registry.type_names()
        return [name for name in names if self.allowed is None or name in self.allowed]

    def registered_type_names(self) -> list[str]:
        return self.registry.type_names()

    def node_problems(self, node: Node) -> list[str]:
        return self.registry.node_problems(node)

    def unknown_type_hint(self, name: str) -> str:
        return self.registry.unknown_type_hint(name)

    def describe(self) -> str:
        """The catalog as the planner reads it: one line per type (and per function)."""
        lines = []
        for name in self.type_names():
            worker_type = self.registry.get(name)
            if worker_type.capabilities is not None and self.settings is not None:
                lines.append(f"- {name} ({worker_type.kind}): {worker_type.description}")
                lines += [f"    - {line}" for line in worker_type.capabilities(self.settings)]
                if worker_type.mcp_servers:  # listed when a node runs: the servers start then
                    servers = ", ".join(worker_type.mcp_servers)
                    lines.append(f"    - the tools of the MCP server(s) {servers}")
                continue
            tools = f"; tools: {', '.join(worker_type.tools)}" if worker_type.tools else ""
            lines.append(f"- {name} ({worker_type.kind}): {worker_type.description}{tools}")
            if worker_type.kind == "function":
                lines += self._functions()
        return "\n".join(lines)

    def _functions(self) -> list[str]:
        lines = []
        for fname in self.registry.functions.names():
            registered = self.registry.functions.get(fname)
            assert registered is not None
            params = ", ".join(registered.params_model.model_fields) or "no params"
            lines.append(f"    - function {fname}({params}): {registered.description}")
        return lines


def plan_problems(
    plan: Plan, request: PlanRequest, catalog: RestrictedCatalog, settings: Settings
) -> list[str]:
    """Everything wrong with a submitted plan (empty: it is accepted), all at once."""
    problems = []
    try:
        plan = with_run_inputs(plan, request, settings)
        validate_plan(plan, catalog, request.limits(settings), request.run_context())
    except PlanError as exc:  # its inputs' problems first: the rest is checked once they fit
        problems += exc.problems
    problems += bounds_problems(plan, settings.planner)
    return problems + output_problems(plan, request, catalog)


def with_run_inputs(plan: Plan, request: PlanRequest, settings: Settings) -> Plan:
    """A planned plan with the run's inputs in its ``{{ inputs.… }}`` (PlanError, with
    RunInputError's lines, if they do not fit). A plan declaring no ``inputs:`` takes
    those the run was given, whatever they are: the planner saw them."""
    given = request.inputs or {}
    if plan.inputs is None and given:
        declared = {"type": "object", "properties": {name: {} for name in given}}
        plan = plan.model_copy(update={"inputs": declared})
    return bind_inputs(plan, given, settings.limits.max_params_bytes).plan


def output_problems(plan: Plan, request: PlanRequest, catalog: RestrictedCatalog) -> list[str]:
    """What is wrong with the output a plan names (or leaves to a synthesis step)."""
    if (
        not request.is_replan
        and needs_synthesis(plan)
        and SYNTHESIS_TYPE not in catalog.type_names()
    ):
        return [
            f"set `output`: the {SYNTHESIS_TYPE} that would combine the results is not among "
            "the worker types this plan may use"
        ]
    replaced_outputs = set(request.run_outputs) & set(request.replaced_ids)
    if request.is_replan and replaced_outputs and not plan.output:
        return [
            f"the run's output {sorted(replaced_outputs)} is replaced: set `output` to the new one"
        ]
    return []


def needs_synthesis(plan: Plan) -> bool:
    """Whether a writer must combine the plan's results: it names no output and ends in
    more than one node (a plan ending in one node answers with it)."""
    return not plan.output and len(plan.output_nodes()) > 1


def planner_spec(settings: Settings) -> AgentSpec:
    return AgentSpec(
        name=PLANNER_TYPE,
        description="Turns a goal into a validated plan.",
        system_prompt=prompt(PLANNER_TYPE),
        model=settings.planner.model,
        tools=("read_input",),  # a re-planner reads completed outputs cut short in its prompt
        policy=ToolPolicy.allowing("read_input"),
        max_turns=settings.planner.max_repairs + 6,
        max_tool_errors=settings.planner.max_repairs + 1,
        max_tokens=8192,
        output_model=PlannedPlan,
        final_tool=SUBMIT_PLAN_TOOL,
    )


def planner_catalog(
    registry: WorkerRegistry, request: PlanRequest, settings: Settings
) -> RestrictedCatalog:
    """The worker types ``request``'s plan may use, within the planner's bounds."""
    allowed = planned_types(request.worker_types, registry.type_names(), settings.planner)
    return RestrictedCatalog(registry, allowed, settings)


def run_planner(ctx: NodeContext, node: Node, registry: WorkerRegistry) -> Any:
    """Plan ``node``'s request; the accepted plan (JSON), or PlanningFailedError."""
    request = PlanRequest.model_validate(node.params)
    catalog = planner_catalog(registry, request, ctx.settings)

    def check(plan: Any) -> list[str]:
        return plan_problems(plan, request, catalog, ctx.settings)

    spec = dataclasses.replace(planner_spec(ctx.settings), check_output=check)
    today = datetime.now(UTC).date()
    message = planning_message(request, catalog, ctx.settings.planner, today)
    asked = node.model_copy(update={"instruction": message})
    try:
        # The goal and context are its instruction, not background.
        data = replanning_data(request)
        return run_agent(ctx, asked, spec, registry.tools, data=data, background=False)
    except AgentToolErrorsError as exc:
        tries = spec.max_tool_errors
        raise PlanningFailedError(
            f"the planner gave no valid plan in {tries} tries; the last was rejected: "
            f"{last_rejection(ctx.last_checkpoint)}"
        ) from exc


def last_rejection(checkpoint: Any) -> str:
    """The text of the last failed tool call in an agent checkpoint."""
    for message in reversed((checkpoint or {}).get("messages", [])):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            errors = [block["content"] for block in content if block.get("is_error")]
            if errors:
                return str(errors[-1]).removeprefix("rejected: ")
        if (
            message.get("role") == "user"
            and isinstance(content, str)
            and SUBMIT_PLAN_TOOL in content
        ):
            return "the model answered without calling submit_plan"
    return "no plan was submitted"


def planning_message(
    request: PlanRequest, catalog: RestrictedCatalog, bounds: PlannerSettings, today: date
) -> str:
    """What the planner is asked: the goal and context (the submitter's: instructions),
    today's date (a goal says "this week", "the latest"), the catalog and the limits."""
    parts = [f"<goal>\n{request.goal}\n</goal>"]
    if request.context:
        parts.append(f"<context>\n{request.context}\n</context>")
    parts.append(f"Today's date is {today.isoformat()}.")
    parts.append(f"Worker types you may use:\n{catalog.describe()}")
    limits = (
        f"Limits: at most {request.max_nodes} nodes; dependency chains of at most "
        f"{request.max_depth} nodes"
    )
    if request.budget is not None:
        limits += f"; the whole run's LLM calls may spend at most {budget_words(request.budget)}"
    parts.append(limits + ". " + bounds_summary(bounds))
    if request.inputs:
        parts.append(inputs_part(request.inputs))
    if request.is_replan:
        parts.append(replanning_part(request))
    return "\n\n".join(parts)


def inputs_part(inputs: dict[str, Any]) -> str:
    """The run's inputs, and how a plan uses them."""
    shown = json.dumps(inputs, ensure_ascii=False)
    if len(shown) > MAX_SHOWN_INPUTS_CHARS:
        shown = shown[:MAX_SHOWN_INPUTS_CHARS] + "…"
    return (
        f"The run was given these inputs: {shown}. Write `{{{{ inputs.<name> }}}}` in a node's "
        "params or instruction to use one: it is replaced by the value before the plan runs "
        "(a param that is only the reference keeps the value's JSON type)."
    )


def replanning_data(request: PlanRequest) -> list[DataGroup]:
    """A re-planner's failed branch, as data: the error may quote model or web text, the
    specs what a model wrote."""
    if not request.is_replan:
        return []
    heading = (
        f"Part of the plan for this goal failed: node {request.failed_node!r} failed for good. "
        "Its error, and the specs of the nodes that will not run and must be replaced:"
    )
    blocks = (
        DataBlock(request.error, {"source": "error"}),
        DataBlock(request.replace, {"source": "replaced"}),
    )
    return [DataGroup(heading, blocks)]


def replanning_part(request: PlanRequest) -> str:
    lines = [
        f"Plan only the replacement of the failed part (node {request.failed_node!r} and the "
        "nodes that waited on it, shown above): nodes that achieve what it was for, in another "
        "way. New nodes may depend on each other, on the completed nodes "
        f"({', '.join(request.completed) or 'none'}: the outputs of those the failed part used "
        "are shown above, read_input gives them whole)"
        + (f", and on these nodes still running: {', '.join(request.open)}" if request.open else "")
        + f". Ids already used, not to reuse: {', '.join(request.taken)}.",
    ]
    replaced_outputs = sorted(set(request.run_outputs) & set(request.replaced_ids))
    if replaced_outputs:
        lines.append(
            f"The run's output {replaced_outputs} is replaced: set `output` to the new one."
        )
    return "\n".join(lines)


def planner_worker_type(registry: WorkerRegistry) -> WorkerType:
    def run(ctx: NodeContext, node: Node) -> Any:
        return run_planner(ctx, node, registry)

    return WorkerType(
        name=PLANNER_TYPE,
        kind="planner",
        description="Turns a goal into a validated plan (dagwright's own).",
        run=run,
        default_retry=PLANNER_RETRY,
        internal=True,
        queue_name=ORCHESTRATOR_QUEUE,
        task=PLAN_TASK,
    )
