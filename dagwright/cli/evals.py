"""Commands about evals: ``eval`` (run a suite), ``evals list``, ``evals show``.

``dagwright eval SUITE`` exits 0 when the eval ran (and held against its baseline and
``--min-pass-rate``), 1 on a regression or a pass rate below the floor, 2 for a bad suite
or flag, 130 when interrupted (the eval is resumable: ``--resume ID``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dagwright.cli.exits import ExitCode
from dagwright.cli.options import ImportOption, JsonOption, client_from, settings_from
from dagwright.cli.output import print_json, stderr, stdout
from dagwright.errors import InputError

if TYPE_CHECKING:
    from dagwright.client import Client
    from dagwright.evals.results import CaseResult, EvalRecord, EvalReport
    from dagwright.evals.runner import EvalOptions, EvalRunner
    from dagwright.evals.suite import EvalSuite
    from dagwright.settings import Settings

evals_app = typer.Typer(
    name="evals",
    help="Evals that ran: list them, show one (and compare it with a baseline).",
    no_args_is_help=True,
)

BaselineOption = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        metavar="FILE|EVAL_ID|latest",
        help="Compare with an earlier eval (its id, `latest` of the same suite, or a file "
        "of `--json` output); a scorer that fell by more than --tolerance exits 1.",
    ),
]
ToleranceOption = Annotated[
    float,
    typer.Option(
        "--tolerance",
        min=0.0,
        max=1.0,
        help="How far a scorer's mean or pass rate may fall below the baseline's.",
    ),
]
JunitOption = Annotated[
    Path | None,
    typer.Option("--junit", metavar="FILE", help="Write a JUnit XML report to FILE (for CI)."),
]


def register(app: typer.Typer) -> None:
    app.command(name="eval")(run_eval)
    app.add_typer(evals_app)


def run_eval(
    suite_file: Annotated[
        Path | None,
        typer.Argument(help="The suite file (YAML or JSON).", show_default=False),
    ] = None,
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, max=20, help="Runs of each case, for the spread.")
    ] = 1,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model of every agent node (plan suites)."),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="NODE.FIELD=VALUE",
            help="Change a node of the plan (repeatable; NODE `*` for all; VALUE as YAML, "
            "@FILE for a file's text), e.g. --set write.instruction=@prompt.md",
        ),
    ] = None,
    cases: Annotated[
        list[str] | None, typer.Option("--case", help="Only this case (repeatable).")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", help="Only cases with this tag (repeatable).")
    ] = None,
    parallel: Annotated[
        int | None,
        typer.Option("--parallel", min=1, max=64, help="Case runs at once (default: suite's)."),
    ] = None,
    case_timeout: Annotated[
        float,
        typer.Option("--case-timeout", min=1.0, help="Cancel a case run not ended after this."),
    ] = 1800.0,
    baseline: BaselineOption = None,
    tolerance: ToleranceOption = 0.0,
    min_pass_rate: Annotated[
        float | None,
        typer.Option(
            "--min-pass-rate",
            min=0.0,
            max=1.0,
            help="Exit 1 if any scorer passes less often than this (e.g. 0.9).",
        ),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="EVAL_ID", help="Go on with an interrupted eval."),
    ] = None,
    fake_llm: Annotated[
        Path | None,
        typer.Option(
            "--fake-llm",
            metavar="SCRIPT",
            help="Answer every LLM call (agents and judge) from a `dagwright fake-llm` "
            "script, on an embedded stack of this command's own: offline, no key.",
        ),
    ] = None,
    junit: JunitOption = None,
    json_output: JsonOption = False,
    imports: ImportOption = None,
) -> None:
    """Run an eval suite: every case as a run on the queue, graded by its scorers, kept.

    Prints cases by scorers, each scorer's pass rate and mean, and what failed. With no
    DAGWRIGHT_REDIS_URL and no `dagwright up`, starts the embedded stack for the command.
    """
    from dagwright.evals.runner import EvalOptions

    settings = settings_from(imports)
    if (suite_file is None) == (resume is None):
        raise InputError("give a suite file, or --resume EVAL_ID (not both)")
    changing = {"--repeat": repeat != 1, "--model": model, "--set": sets, "--case": cases}
    changing["--tag"] = tags
    if resume is not None and any(changing.values()):
        given = ", ".join(flag for flag, value in changing.items() if value)
        raise InputError(f"--resume goes on with the eval as it started: drop {given}")
    options = EvalOptions(
        repeat=repeat,
        model=model,
        sets=sets or [],
        cases=cases,
        tags=tags,
        parallel=parallel,
        case_timeout_s=case_timeout,
        baseline=baseline,
    )
    suite = _checked_suite(suite_file, settings) if suite_file is not None else None

    def evaluate(client: Client) -> int:
        runner, record = _runner(client, suite, suite_file, options, resume)
        against = None if baseline is None else baseline_report(client, baseline, runner.suite.name)
        report = _run(runner, record, quiet=json_output)
        return _report(report, against, tolerance, min_pass_rate, junit, json_output)

    if settings.redis.url and fake_llm is None:
        from dagwright.client import Client

        raise typer.Exit(evaluate(Client(settings)))
    with offline_llm(fake_llm, settings, quiet=json_output) as settings:
        raise typer.Exit(_on_local_stack(settings, evaluate, quiet=json_output))


def _on_local_stack(settings: Settings, evaluate: Callable[[Client], int], *, quiet: bool) -> int:
    """``evaluate`` against the local stack (``up``'s, or one started for this command)."""
    from dagwright.cli.runs import say_dimly
    from dagwright.client import Client
    from dagwright.embedded import shared_stack

    with shared_stack(settings, say=lambda line: say_dimly(line, quiet=quiet)) as stack:
        return evaluate(Client(settings.model_copy(update={"redis_url": stack.redis_url})))


@contextmanager
def offline_llm(script: Path | None, settings: Settings, *, quiet: bool) -> Iterator[Settings]:
    """``settings`` answered by a fake Messages API playing ``script`` while the command
    runs (or as they are, with no script). The stack's workers must see it: so it is one
    started here, never `up`'s or another command's, nor a configured Redis's."""
    if script is None:
        yield settings
        return
    from dagwright.embedded.shared import running_record
    from dagwright.testing import FakeAnthropicServer
    from dagwright.testing.fake_anthropic_script import Script

    if settings.redis.url or running_record(settings.process.data_dir) is not None:
        raise InputError(
            "--fake-llm starts a local stack of its own, and one runs already (or "
            "DAGWRIGHT_REDIS_URL is set): stop it, or serve the script with `dagwright "
            "fake-llm` and point that stack's workers at it (ANTHROPIC_BASE_URL)"
        )
    with FakeAnthropicServer(Script.load(script)) as fake:
        for name in ("ANTHROPIC_BASE_URL", "DAGWRIGHT_ANTHROPIC_BASE_URL"):
            os.environ[name] = fake.base_url  # the stack's workers inherit it
        try:
            yield settings.model_copy(update={"anthropic_base_url": fake.base_url})
        finally:
            if not quiet:
                asked = len(fake.requests)
                stderr.print(f"[dim]fake LLM: {asked} request(s) answered[/]", soft_wrap=True)


def _checked_suite(suite_file: Path, settings: Settings) -> EvalSuite:
    """The suite, read and validated before any stack starts (exit 2 on a problem)."""
    from dagwright.evals.suite import load_suite

    return load_suite(suite_file, max_bytes=settings.limits.max_plan_file_bytes)


def _runner(
    client: Client,
    suite: EvalSuite | None,
    suite_file: Path | None,
    options: EvalOptions,
    resume: str | None,
) -> tuple[EvalRunner, EvalRecord | None]:
    from dagwright.evals.runner import EvalRunner, resume_runner

    if resume is not None:
        return resume_runner(
            client, resume, parallel=options.parallel, case_timeout_s=options.case_timeout_s
        )
    assert suite is not None and suite_file is not None  # run_eval: one or the other
    runner = EvalRunner(
        client, suite, options, suite_dir=suite_file.parent, suite_file=str(suite_file)
    )
    return runner, None


def _run(runner: EvalRunner, record: EvalRecord | None, *, quiet: bool) -> EvalReport:
    record = record or runner.new_record()
    if not quiet:
        stderr.print(f"[dim]eval {record.id}: {len(record.cases)} case(s)[/]", soft_wrap=True)

    def progress(result: CaseResult, kept: int, total: int) -> None:
        if quiet:
            return
        passed = sum(score.passed for score in result.scores)
        which = result.case if record.repeat == 1 else f"{result.case}#{result.repeat}"
        stderr.print(
            f"[dim][{kept}/{total}] {which}: {result.status}, "
            f"{passed}/{len(result.scores)} passed[/]",
            soft_wrap=True,
        )

    try:
        return runner.run(record, on_progress=progress)
    except KeyboardInterrupt:
        stderr.print(
            f"interrupted: the case runs go on; `dagwright eval --resume {record.id}` "
            "grades them and runs the rest",
            soft_wrap=True,
        )
        raise typer.Exit(ExitCode.INTERRUPTED) from None


def _report(
    report: EvalReport,
    baseline: EvalReport | None,
    tolerance: float,
    min_pass_rate: float | None,
    junit: Path | None,
    json_output: bool,
) -> int:
    from dagwright.cli.evalviews import print_report
    from dagwright.evals.reports import junit_xml, report_json

    comparison = None
    if baseline is not None:
        from dagwright.evals.baselines import compare

        comparison = compare(report, baseline, tolerance=tolerance)
    if junit is not None:
        junit.write_text(junit_xml(report), encoding="utf-8")
    if json_output:
        print_json(report_json(report, comparison))
    else:
        print_report(report, stdout)
        if comparison is not None:
            from dagwright.cli.evalviews import print_comparison

            print_comparison(comparison, stdout)
    below = _below_floor(report, min_pass_rate)
    if below and not json_output:
        stderr.print(f"pass rate below {min_pass_rate:.0%}: {', '.join(below)}", soft_wrap=True)
    regressed = comparison is not None and bool(comparison.regressions)
    return ExitCode.RUN_FAILED if regressed or below else ExitCode.OK


def _below_floor(report: EvalReport, floor: float | None) -> list[str]:
    if floor is None:
        return []
    return [stats.scorer for stats in report.stats() if stats.pass_rate < floor]


def baseline_report(
    client: Client, baseline: str, suite: str, *, before: str | None = None
) -> EvalReport:
    """The baseline named, read before anything runs: ``latest`` (the suite's newest
    finished eval, before the eval ``before``), an eval id, or a file of ``--json``."""
    from dagwright.evals.reports import load_report
    from dagwright.evals.runner import eval_store

    store = eval_store(client)
    if baseline == "latest":
        found = store.latest_of(suite, before=before)
        if found is None:
            raise InputError(f"--baseline latest: no finished eval of suite {suite!r} yet")
        return store.report(found.id)
    if baseline.startswith("ev_") and not Path(baseline).exists():
        return store.report(baseline)
    return load_report(Path(baseline), max_bytes=client.settings.limits.max_plan_file_bytes * 16)


@evals_app.command(name="list")
def list_evals(
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite's.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 20,
    json_output: JsonOption = False,
) -> None:
    """The newest evals first: suite, when, cases, pass rate."""
    from dagwright.cli.evalviews import print_eval_list
    from dagwright.evals.json_views import eval_summary_json
    from dagwright.evals.runner import eval_store

    store = eval_store(client_from(None))
    reports = [store.report(record.id) for record in store.list(limit=limit, suite=suite)]
    if json_output:  # the API's rows: the record (no suite, no plan) and its figures
        print_json([eval_summary_json(report) for report in reports])
        return
    print_eval_list(reports, stdout)


@evals_app.command(name="show")
def show_eval(
    eval_id: Annotated[str, typer.Argument(help="The eval's id (ev_...).", show_default=False)],
    baseline: BaselineOption = None,
    tolerance: ToleranceOption = 0.0,
    junit: JunitOption = None,
    json_output: JsonOption = False,
) -> None:
    """One eval: cases by scorers, scorers' statistics, failures; with --baseline, what
    got worse (both outputs)."""
    from dagwright.evals.runner import eval_store

    client = client_from(None)
    report = eval_store(client).report(eval_id)
    against = None
    if baseline is not None:
        against = baseline_report(client, baseline, report.record.suite, before=eval_id)
    code = _report(report, against, tolerance, None, junit, json_output)
    raise typer.Exit(code)
