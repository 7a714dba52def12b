"""`dagwright plan`: ask the planner for a plan and show it, running nothing."""

from __future__ import annotations

from typing import Annotated

import typer

from dagwright.cli.options import (
    BudgetInputOption,
    BudgetOption,
    BudgetOutputOption,
    BudgetUsdOption,
    ContextOption,
    ImportOption,
    JsonOption,
    MaxDepthOption,
    MaxNodesOption,
    WorkerTypeOption,
    budget_from,
    settings_from,
)
from dagwright.cli.output import plan_tree, print_json, spend, stderr, stdout


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(
    goal: Annotated[
        str, typer.Argument(help="What the run must achieve, in words.", show_default=False)
    ],
    json_output: JsonOption = False,
    context: ContextOption = "",
    worker_types: WorkerTypeOption = None,
    max_nodes: MaxNodesOption = None,
    max_depth: MaxDepthOption = None,
    budget_tokens: BudgetOption = None,
    budget_input_tokens: BudgetInputOption = None,
    budget_output_tokens: BudgetOutputOption = None,
    budget_usd: BudgetUsdOption = None,
    imports: ImportOption = None,
) -> None:
    """Plan a goal and show the validated DAG as a tree and as JSON; nothing runs and no
    run is written (it needs an LLM, not Redis)."""
    from dagwright.client import plan_goal
    from dagwright.planning.goals import GoalOptions  # the planner: only for this command
    from dagwright.plans.builder import plan_to_json

    budget = budget_from(budget_tokens, budget_input_tokens, budget_output_tokens, budget_usd)
    options = GoalOptions(
        context=context,
        worker_types=worker_types,
        max_nodes=max_nodes,
        max_depth=max_depth,
        budget=budget,
    )
    planned = plan_goal(goal, settings_from(imports), options)
    if json_output:
        print_json(planned.plan.model_dump(mode="json", exclude_defaults=True))
        return
    stdout.print(plan_tree(planned.plan))
    stdout.print()
    typer.echo(plan_to_json(planned.plan))
    stderr.print(f"[dim]{len(planned.plan.nodes)} nodes, planned{spend(planned.usage)}[/]")
