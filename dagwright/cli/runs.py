"""Commands about runs: run, validate, status, result, events, runs, cancel."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from dagwright.cli.exits import ExitCode
from dagwright.cli.options import (
    BudgetInputOption,
    BudgetOption,
    BudgetOutputOption,
    BudgetUsdOption,
    ContextOption,
    ImportOption,
    InputOption,
    InputsFileOption,
    JsonOption,
    MaxDepthOption,
    MaxNodesOption,
    WideOption,
    WorkerTypeOption,
    budget_from,
    client_from,
    inputs_from,
    settings_from,
)
from dagwright.cli.output import (
    ProgressDisplay,
    print_audit,
    print_error,
    print_event,
    print_json,
    print_result,
    print_runs,
    print_status,
    print_summary,
    stderr,
)
from dagwright.embedded import SharedStack, shared_stack
from dagwright.errors import (
    ConfigurationError,
    InputError,
    PlanError,
    RunInputError,
    RunNotFinishedError,
)
from dagwright.json_views import run_json
from dagwright.models import MAX_PRIORITY, MIN_PRIORITY, Plan, RunCounts, RunState, RunStatus
from dagwright.stackfile import read_stack

# The client, the planner and plan checking load in the commands that use them, so that
# `--help` and the read-only commands (`status`, `events`) start without them.
if TYPE_CHECKING:
    from dagwright.client import Client, RunHandle
    from dagwright.orchestrator.control.run_request import RunRequest
    from dagwright.plans.validation import PlanGraph
    from dagwright.settings import Settings

TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", help="Give up waiting after this many seconds (exit 3)."),
]
RunTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--run-timeout",
        help="Stop the run (it fails) if it has not finished this many seconds after its "
        "submission; unlike --timeout, this ends the run itself.",
    ),
]


def register(app: typer.Typer) -> None:
    for command in (run, validate, status, result, events, audit, runs, cancel):
        app.command()(command)


def run(
    target: Annotated[
        str,
        typer.Argument(
            help="A plan file (YAML or JSON), or a goal in words for the planner.",
            show_default=False,
        ),
    ],
    json_output: JsonOption = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Print the run id and return at once.")
    ] = False,
    timeout: TimeoutOption = None,
    context: ContextOption = "",
    worker_types: WorkerTypeOption = None,
    max_nodes: MaxNodesOption = None,
    max_depth: MaxDepthOption = None,
    replan: Annotated[
        bool | None,
        typer.Option("--replan/--no-replan", help="Re-plan a branch that fails for good (goals)."),
    ] = None,
    budget_tokens: BudgetOption = None,
    budget_input_tokens: BudgetInputOption = None,
    budget_output_tokens: BudgetOutputOption = None,
    budget_usd: BudgetUsdOption = None,
    run_timeout_s: RunTimeoutOption = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            "--idempotency-key",
            help="Run once per key: repeated (a retried script), it follows the first run.",
        ),
    ] = None,
    max_concurrent: Annotated[
        int | None,
        typer.Option("--max-concurrent", min=1, help="Most of the run's nodes running at once."),
    ] = None,
    priority: Annotated[
        int | None,
        typer.Option(
            "--priority",
            min=MIN_PRIORITY,
            max=MAX_PRIORITY,
            help="1 to 5, higher first: the run's nodes' place among all waiting for a "
            "worker; default: the plan file's priority, else 3.",
        ),
    ] = None,
    response_cache: Annotated[
        bool | None,
        typer.Option(
            "--response-cache/--no-response-cache",
            help="Answer the run's agent calls from the response cache when the same request "
            "was answered before (0 tokens); default: the plan file's response_cache.",
        ),
    ] = None,
    llm_batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the run's LLM calls through the Message Batches API: half the price, "
            "each answered within 24 hours (nodes wait parked). For --no-wait runs.",
        ),
    ] = False,
    input_pairs: InputOption = None,
    inputs_file: InputsFileOption = None,
    imports: ImportOption = None,
    as_goal: Annotated[
        bool,
        typer.Option(
            "--goal",
            help="TARGET is a goal even if it is one word or names a file (by default one "
            "word without spaces is taken for a plan file).",
        ),
    ] = False,
    webhook_urls: Annotated[
        list[str] | None,
        typer.Option(
            "--webhook",
            metavar="URL",
            help="POST a signed JSON to URL when the run ends, whatever the end (repeat for "
            "more); signed with DAGWRIGHT_WEBHOOK_SECRET. See `dagwright webhooks`.",
        ),
    ] = None,
    not_before: Annotated[
        str | None,
        typer.Option(
            "--not-before",
            metavar="TIME",
            help="Start the run's first nodes at TIME (ISO 8601, e.g. 2026-11-29T05:00:00Z; "
            "no zone: UTC); the run is written now. Celery's eta.",
        ),
    ] = None,
    countdown_s: Annotated[
        float | None,
        typer.Option(
            "--countdown",
            metavar="SECONDS",
            help="Start the run's first nodes SECONDS from now (Celery's countdown).",
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory",
            metavar="NAMESPACE",
            help="The memory namespace the run's agents use (runs naming it share their "
            "memory); wins over the plan file's memory.",
        ),
    ] = None,
) -> None:
    """Run a plan file, or a goal that the planner turns into a plan, and wait for its
    result, showing progress.

    With no DAGWRIGHT_REDIS_URL and no `dagwright up` running, starts the embedded stack
    (Valkey and workers) for the duration of the command.
    """
    from dagwright.client import Client

    settings = settings_from(imports)
    budget = budget_from(budget_tokens, budget_input_tokens, budget_output_tokens, budget_usd)
    options: dict[str, Any] = {
        "context": context,
        "worker_types": worker_types,
        "max_nodes": max_nodes,
        "max_depth": max_depth,
        "replan": replan,
        "budget": budget,
        "max_concurrent_nodes": max_concurrent,
        "timeout_s": run_timeout_s,
        "response_cache": response_cache,
        "llm_batch": llm_batch,
        "webhooks": webhook_urls or [],
        "priority": priority,
        "not_before": not_before,
        "countdown_s": countdown_s,
        "memory": memory,
    }
    try:
        request = run_request_for(  # checked now, before any stack starts
            target, settings, options, as_goal=as_goal, given_inputs=(input_pairs, inputs_file)
        )
    except RunInputError as exc:  # every problem, one line each
        report_plan_problems(exc, target, json_output=json_output)
        raise typer.Exit(ExitCode.INPUT_ERROR) from None

    def submission(client: Client) -> RunHandle:
        return client.submit(request, idempotency_key=idempotency_key)

    if settings.redis.url or (no_wait and up_is_running(settings)):
        code = submit_and_wait(
            Client(settings), submission, json_output, no_wait, timeout, embedded=None
        )
        raise typer.Exit(code)
    if no_wait:
        raise ConfigurationError(
            "--no-wait needs a stack that outlives this command: start `dagwright up` "
            "or set DAGWRIGHT_REDIS_URL"
        )
    # The local stack (`up`'s, or one shared with other runs), held by a lease so that it
    # outlives this run however the others end.
    with shared_stack(settings, say=lambda line: say_dimly(line, quiet=json_output)) as stack:
        client = Client(settings.model_copy(update={"redis_url": stack.redis_url}))
        code = submit_and_wait(client, submission, json_output, False, timeout, embedded=stack)
    raise typer.Exit(code)


def up_is_running(settings: Settings) -> bool:
    """Whether `dagwright up` runs: a stack that outlives this command (one shared by
    `dagwright run`s stops when they have ended)."""
    record = read_stack(settings.process.data_dir)
    return record is not None and record.owner == "up"


def say_dimly(line: str, *, quiet: bool) -> None:
    if not quiet:
        stderr.print(f"[dim]{escape(line)}[/]", soft_wrap=True)


def is_plan_file(target: str, *, as_goal: bool = False) -> bool:
    """Whether ``target`` names a plan file rather than a goal: unless ``--goal`` says
    otherwise, an existing path, a name with a plan file's extension, or one path-like word
    (``diamond``, ``plans/x``): goals are sentences, and a mistyped file name must not be
    sent to the planner (a run, a failure and a dead letter, paid for with a key)."""
    if as_goal:
        return False
    if target.lower().endswith(PLAN_FILE_SUFFIXES) or not any(c.isspace() for c in target):
        return True
    try:
        return Path(target).exists()
    except OSError:  # a long goal is no valid path ("File name too long")
        return False


PLAN_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def run_request_for(
    target: str,
    settings: Settings,
    options: dict[str, Any],
    *,
    as_goal: bool = False,
    given_inputs: tuple[list[str] | None, Path | None] = (None, None),
) -> RunRequest:
    """What ``dagwright run TARGET`` asks for (a checked plan file, or a goal for the
    planner) with the flags' ``options`` (``RunOptions``' names), as the RunRequest every
    door builds; checked now, before any stack starts. ``given_inputs``: the --input
    pairs and the --inputs file, read against the plan's schema."""
    from dagwright.client.run_options import build_run_request
    from dagwright.orchestrator.control.start_times import start_fields

    if not target.strip():
        raise InputError("nothing to run: give a plan file, or a goal in words")
    given = {name: value for name, value in options.items() if value is not None}
    plan = None
    if is_plan_file(target, as_goal=as_goal):
        misplaced = [FLAGS[name] for name in FLAGS if given.get(name) not in (None, "", [])]
        if misplaced:
            raise InputError(
                f"{', '.join(misplaced)} apply to goals, not to the plan file {target}"
            )
        plan, given["inputs"], _ = check_plan_file(Path(target), settings, given_inputs)
    else:
        given |= {"goal": target, "inputs": inputs_from(*given_inputs, None, settings)}
    request = build_run_request(
        "dagwright run", plan, given, max_plan_file_bytes=settings.limits.max_plan_file_bytes
    )
    start_fields(request.not_before, request.countdown_s, settings.limits.max_start_delay_s)
    return request


FLAGS = {
    "context": "--context",
    "worker_types": "--worker-types",
    "max_nodes": "--max-nodes",
    "max_depth": "--max-depth",
    "replan": "--replan",
}


def check_plan_file(
    plan_file: Path,
    settings: Settings,
    given_inputs: tuple[list[str] | None, Path | None] = (None, None),
) -> tuple[Plan, dict[str, Any] | None, PlanGraph]:
    """Load a plan file and validate it as it would run with the inputs given (--input
    pairs, --inputs file: read against its schema, its templates filled in); problems
    name the file (RunInputError for the inputs). With a stack running, a function its
    live workers have passes (orchestrator/control/live_registry.py). Returns the plan,
    those inputs and the validated graph."""
    from dagwright.orchestrator.control.live_registry import stack_workers, widened
    from dagwright.orchestrator.control.submission import check_plan
    from dagwright.plans.files import load_plan
    from dagwright.plans.run_inputs import bind_inputs
    from dagwright.registry import build_registry

    plan = load_plan(plan_file, max_bytes=settings.limits.max_plan_file_bytes)
    inputs = inputs_from(*given_inputs, plan.inputs, settings)
    try:
        bound = bind_inputs(plan, inputs, settings.limits.max_params_bytes)
        registry = widened(build_registry(settings), stack_workers(settings))
        return plan, inputs, check_plan(bound.plan, settings, registry)
    except PlanError as exc:  # RunInputError included: the same class, naming the file
        command = f"`dagwright validate {plan_file}`"
        raise type(exc)(exc.problems, source=str(plan_file), listed_by=command) from None


def submit_and_wait(
    client: Client,
    submission: Callable[[Client], RunHandle],
    json_output: bool,
    no_wait: bool,
    timeout: float | None,
    *,
    embedded: SharedStack | None,
) -> int:
    handle = submission(client)
    if no_wait:
        if json_output:
            status, _ = client.counts(handle.run_id)  # a goal run starts in "planning"
            print_json({"run_id": handle.run_id, "status": status.value})
        else:
            typer.echo(handle.run_id)
        return ExitCode.OK
    try:
        state = wait_with_progress(
            client, handle.run_id, timeout, show=not json_output, embedded=embedded
        )
    except KeyboardInterrupt:
        stderr.print(
            interrupted_message(handle.run_id, embedded=pauses_with_runs(embedded)),
            soft_wrap=True,
        )
        return ExitCode.INTERRUPTED
    except RunNotFinishedError as exc:
        later = (
            "it resumes when the local stack next starts (`dagwright up`)"
            if pauses_with_runs(embedded)
            else f"follow it with `dagwright status {handle.run_id}`"
        )
        raise RunNotFinishedError(f"{exc}; {later}", run_id=handle.run_id) from exc
    return report_final(state, json_output)


def pauses_with_runs(stack: SharedStack | None) -> bool:
    """Whether the run stops being worked on when the runs using the stack have ended
    (a stack of `dagwright run`s, not of `up`)."""
    return stack is not None and stack.record.owner == "run"


def interrupted_message(run_id: str, *, embedded: bool) -> str:
    """What a person who pressed Ctrl-C while waiting needs: the run goes on (or pauses)."""
    if embedded:
        return (
            f"interrupted: run {run_id} pauses with the embedded stack; it goes on when a "
            f"stack runs (`dagwright up`), then `dagwright watch {run_id}`"
        )
    return (
        f"interrupted: run {run_id} goes on; follow it with `dagwright watch {run_id}`, "
        f"stop it with `dagwright cancel {run_id}`"
    )


def wait_with_progress(
    client: Client,
    run_id: str,
    timeout: float | None,
    *,
    show: bool,
    embedded: SharedStack | None,
) -> RunState:
    with ProgressDisplay(run_id, enabled=show) as progress:

        def on_progress(status: RunStatus, counts: RunCounts) -> None:
            if embedded is not None:
                embedded.check_alive()
            # Only a node that is neither running nor done may be waiting on something.
            idle = counts.total - counts.done - counts.running
            waits = client.waits(run_id) if idle and show else None
            note = busy_note(client, run_id, counts.running) if idle and show and not waits else ""
            progress.update(status, counts, waits, note)

        return client.wait(run_id, timeout, on_progress=on_progress)


def busy_note(client: Client, run_id: str, running: int) -> str:
    """Why the run's queued nodes wait when its ``running`` ones take every worker
    process ("" if they do not): `up` starts one per CPU, which a person does not guess."""
    from dagwright.orchestrator.control.worker_waits import behind_busy_workers

    runtime = client.runtime
    queued = runtime.client.zcard(runtime.keys.run_key(run_id, "queued"))
    return behind_busy_workers(running, queued, client.live_workers.read())


def report_final(state: RunState, json_output: bool) -> int:
    if json_output:
        print_json(run_json(state))
    else:
        print_summary(state)
        if state.status == RunStatus.SUCCEEDED:
            print_result(state.result)
    return ExitCode.OK if state.status == RunStatus.SUCCEEDED else ExitCode.RUN_FAILED


def validate(
    plan_file: Annotated[
        Path, typer.Argument(help="A plan file (YAML or JSON).", show_default=False)
    ],
    json_output: JsonOption = False,
    input_pairs: InputOption = None,
    inputs_file: InputsFileOption = None,
    imports: ImportOption = None,
) -> None:
    """Check a plan file without running it (exit 2 and every problem if it is invalid:
    one line each; with --json, ``{"valid": false, "problems": [...]}``). A plan taking
    inputs is checked with those given (--input, --inputs) and its defaults. With a stack
    running, a function its live workers have is valid without --import."""
    settings = settings_from(imports)
    try:
        _, _, graph = check_plan_file(plan_file, settings, (input_pairs, inputs_file))
    except PlanError as exc:
        report_plan_problems(exc, str(plan_file), json_output=json_output)
        raise typer.Exit(ExitCode.INPUT_ERROR) from None
    if json_output:
        print_json(
            {"valid": True, "nodes": len(graph.plan.nodes), "order": graph.topological_order}
        )
    else:
        typer.echo(
            f"{plan_file}: valid, {len(graph.plan.nodes)} nodes, roots: {', '.join(graph.roots)}"
        )


def report_plan_problems(exc: PlanError, plan_file: str, *, json_output: bool) -> None:
    """Every problem of an invalid plan: a JSON object on stdout, or one line each on
    stderr (a single problem stays the one line any refused command prints)."""
    if json_output:
        print_json({"valid": False, "file": plan_file, "problems": exc.problems})
    elif len(exc.problems) == 1:
        print_error(exc.summary())
    else:
        source = f"{exc.source}: " if exc.source else ""
        print_error(f"{source}{len(exc.problems)} problems:")
        for problem in exc.problems:
            stderr.print(f"  - {escape(problem)}", soft_wrap=True)


def status(run_id: str, json_output: JsonOption = False) -> None:
    """Show a run: its status, every node, and a summary of its scores."""
    from dagwright.cli.scores import print_scores_summary

    client = client_from(None)
    state = client.status(run_id)
    if json_output:
        print_json(run_json(state))
    else:
        print_status(state)
        if not state.status.is_final:
            note = busy_note(client, run_id, state.counts.running)
            if note:
                typer.echo(note)
        print_scores_summary(client.scores(run_id))


def result(
    run_id: str,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to finish.")] = False,
    timeout: TimeoutOption = None,
    json_output: JsonOption = False,
) -> None:
    """Print a run's result (exit 1 if it failed, 3 if it has not finished)."""
    from dagwright.client import result_of

    client = client_from(None)
    state = client.wait(run_id, timeout) if wait else client.status(run_id)
    if not state.status.is_final:
        raise RunNotFinishedError(
            f"run {run_id} is still {state.status.value} ({state.counts.done}/{state.counts.total} "
            "nodes done); use --wait to wait for it",
            run_id=run_id,
        )
    value = result_of(state)
    if json_output:
        print_json(value)
    else:
        print_result(value)


def events(
    run_id: str,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow/--no-follow", "-f", help="Keep printing new events until the run ends."
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Print a run's events (one JSON object per line with --json)."""
    for event in client_from(None).events(run_id, follow=follow):
        print_event(event, as_json=json_output)


def audit(run_id: str, json_output: JsonOption = False, wide: WideOption = False) -> None:
    """Print the tool-policy decisions of a run's agents (allow, deny, refused by the
    tool, require_approval) and the approvals (requested, approved, rejected)."""
    entries = client_from(None).audit(run_id)
    if json_output:
        print_json([entry.model_dump(mode="json") for entry in entries])
    else:
        print_audit(entries, wide=wide)


def runs(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="How many runs, newest first.")
    ] = 20,
    json_output: JsonOption = False,
    wide: WideOption = False,
) -> None:
    """List recent runs."""
    states = client_from(None).list_runs(limit)
    if json_output:
        summaries = [run_json(state) for state in states]
        print_json(
            [{k: v for k, v in s.items() if k not in ("nodes", "result")} for s in summaries]
        )
    else:
        print_runs(states, wide=wide)


def cancel(run_id: str, json_output: JsonOption = False) -> None:
    """Cancel a run: queued nodes never start, running ones are stopped (sandboxed code
    killed) within about a second, and the run never resumes."""
    client = client_from(None)
    before, _ = client.counts(run_id)  # the run's hash only, not every node
    state = client.cancel(run_id)
    if json_output:
        print_json({"run_id": run_id, "status": state.status.value, "was": before.value})
    elif before.is_final:
        typer.echo(f"run {run_id} had already {before.value}; nothing to cancel")
    else:
        typer.echo(f"run {run_id} cancelled")
