"""Running an eval: every case as an ordinary run on the queue, graded, its result kept.

The driver (``dagwright eval``, or ``evaluate()`` from Python) submits the cases' runs, at
most ``parallel`` at once, each with the idempotency key ``eval:<id>:<case>#<repeat>``:
a driver that was stopped and resumed (``--resume``) follows the very runs it started
rather than paying for new ones. The runs themselves are the queue's: retries, budgets,
breakers and the DLQ apply, and a worker killed under a case only delays it. When a run
ends, the driver reads its outcome, grades it (``scorers.py``, then the judge, whose
verdicts are cached) and keeps the result once (HSETNX): a case run is scored once
however often the driver is resumed.

Every wait is bounded: a case run that has not ended ``case_timeout_s`` after it was
submitted is cancelled and kept as an ``error`` result saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.errors import DagwrightError, InputError, RunNotFinishedError
from dagwright.evals.changes import FieldChange, changed_plan
from dagwright.evals.grading import CaseGrader
from dagwright.evals.outcomes import read_outcome
from dagwright.evals.results import CaseResult, EvalRecord, EvalReport
from dagwright.evals.scorers import failed_score
from dagwright.evals.store import EvalStore, new_eval_id
from dagwright.evals.suite import (
    EvalCase,
    EvalSuite,
    SuiteError,
    parse_suite,
    suite_digest,
)
from dagwright.plans.files import parse_plan

if TYPE_CHECKING:
    from dagwright.client import Client
    from dagwright.client.runs import RunOptions
    from dagwright.models import Plan

DEFAULT_CASE_TIMEOUT_S = 1800.0
CANCEL_REASON = "the eval's case timeout passed"
CANCEL_WAIT_S = 30.0  # for a cancelled case run to end (its nodes stop within a second)
WAIT_SLICE_S = 1.0  # a case thread looks whether the eval was interrupted this often


class EvalInterrupted(Exception):
    """The eval stopped (Ctrl-C, an error elsewhere) while a case thread waited on its run."""


@dataclass(frozen=True)
class EvalOptions:
    """How to run a suite this time, without editing it."""

    repeat: int = 1
    """Runs of each case (for the spread of its grades)."""
    model: str | None = None
    """The model of every agent node of the plan (plan suites)."""
    sets: list[str] = field(default_factory=list)
    """``NODE.FIELD=VALUE`` changes of the plan (``changes.py``)."""
    cases: list[str] | None = None
    """Only these cases (by name)."""
    tags: list[str] | None = None
    """Only the cases with one of these tags."""
    parallel: int | None = None
    """Case runs at once (default: the suite's ``parallel``)."""
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    """Longest wait for one case run before it is cancelled."""
    baseline: str | None = None
    """What the eval will be compared with (recorded, for people)."""


ProgressCallback = Callable[[CaseResult, int, int], None]
"""Told of each kept result: the result, how many are kept, how many there are."""


@dataclass
class CaseJob:
    """One run of one case: what to submit and how to grade it."""

    case: EvalCase
    repeat: int
    submit: Callable[[Client, str], str]
    """Submits the run (with the idempotency key given) and returns its id."""

    @property
    def key(self) -> str:
        return f"{self.case.name}#{self.repeat}"


class EvalRunner:
    """Runs one eval of a suite against a client's stack."""

    def __init__(
        self,
        client: Client,
        suite: EvalSuite,
        options: EvalOptions,
        *,
        suite_dir: Path,
        suite_file: str = "",
        plan_data: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.suite = suite
        self.options = options
        self.suite_dir = suite_dir
        self.suite_file = suite_file
        self.store = eval_store(client)
        self.cases = suite.picked(options.cases, options.tags)
        # Checked now: a bad --set fails before any run. A resumed eval runs the plan it
        # kept, whatever the file holds now (its runs' idempotency keys name that plan).
        self.plan = self._plan() if plan_data is None else parse_plan(plan_data)
        self._check_cases()
        self.grader = CaseGrader(client, suite)
        self._stopping = threading.Event()

    # -- starting ---------------------------------------------------------------------

    def _plan(self) -> Plan | None:
        if not self.suite.plan:
            if self.options.model or self.options.sets:
                raise InputError(
                    "--model and --set change a plan suite's plan; a goal suite's plan is "
                    "the planner's (set DAGWRIGHT_PLANNER_MODEL / DAGWRIGHT_DEFAULT_MODEL "
                    "on the workers)"
                )
            return None
        from dagwright.plans.files import load_plan

        path = (self.suite_dir / self.suite.plan).resolve()
        plan = load_plan(path, max_bytes=self.client.settings.limits.max_plan_file_bytes)
        registry = self.client.runtime.registry
        agents = {t.name for t in registry.types() if t.kind == "agent"}
        changes = [FieldChange.parse(text) for text in self.options.sets]
        return changed_plan(plan, model=self.options.model, changes=changes, agent_types=agents)

    def _check_cases(self) -> None:
        """Each case's plan as it would run with its inputs, checked now (SuiteError, every
        problem naming its case): a suite whose plan cannot run pays for no run."""
        from dagwright.errors import PlanError
        from dagwright.orchestrator.control.submission import check_plan
        from dagwright.plans.run_inputs import bind_inputs

        if self.plan is None:
            return
        settings, registry = self.client.settings, self.client.runtime.registry
        problems: list[str] = []
        for case in self.cases:
            try:
                bound = bind_inputs(self.plan, case.inputs, settings.limits.max_params_bytes)
                check_plan(bound.plan, settings, registry)
            except PlanError as exc:
                problems += [f"case {case.name}: {problem}" for problem in exc.problems]
        if problems:
            raise SuiteError(problems, source=self.suite_file or None)

    def new_record(self) -> EvalRecord:
        """The record of a new eval of the picked cases."""
        changes: dict[str, Any] = {}
        if self.options.model:
            changes["model"] = self.options.model
        if self.options.sets:
            changes["set"] = list(self.options.sets)
        return EvalRecord(
            id=new_eval_id(),
            suite=self.suite.name,
            suite_digest=suite_digest(self.suite),
            suite_file=self.suite_file,
            started_at=datetime.now(UTC),
            cases=[case.name for case in self.cases],
            scorers={
                case.name: [s.label() for s in self.suite.scorers_of(case)] for case in self.cases
            },
            repeat=self.options.repeat,
            changes=changes,
            baseline=self.options.baseline,
            suite_data=self.suite.model_dump(mode="json", by_alias=True),
            plan_data=None if self.plan is None else self.plan.model_dump(mode="json"),
        )

    # -- running ----------------------------------------------------------------------

    def run(
        self, record: EvalRecord | None = None, *, on_progress: ProgressCallback | None = None
    ) -> EvalReport:
        """Run the eval (``record``: one being resumed) and return its report."""
        self.grader.check_judge(self.cases)
        record = record or self.new_record()
        self.store.save(record)
        done = self.store.result_keys(record.id)
        jobs = [job for job in self.jobs(record) if job.key not in done]
        total = len(record.cases) * record.repeat
        try:
            self._run_jobs(record, jobs, total - len(jobs), total, on_progress)
        except BaseException:
            self.store.save(record.model_copy(update={"status": "interrupted"}))
            raise
        finished = record.model_copy(update={"status": "finished", "finished_at": _now()})
        self.store.save(finished)
        return self.store.report(record.id)

    def jobs(self, record: EvalRecord) -> list[CaseJob]:
        cases = {case.name: case for case in self.cases}
        return [
            CaseJob(cases[name], repeat, self._submitter(cases[name]))
            for repeat in range(record.repeat)
            for name in record.cases
            if name in cases
        ]

    def _run_jobs(
        self,
        record: EvalRecord,
        jobs: list[CaseJob],
        kept: int,
        total: int,
        on_progress: ProgressCallback | None,
    ) -> None:
        parallel = self.options.parallel or self.suite.parallel
        pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="eval-case")
        running: set[Future[CaseResult]] = set()
        pending = list(reversed(jobs))
        try:
            while pending or running:
                while pending and len(running) < parallel:
                    running.add(pool.submit(self.run_case, record, pending.pop()))
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    result = future.result()
                    if self.store.add_result(record.id, result):
                        kept += 1
                        self.grader.score_run(record, result)
                        if on_progress is not None:
                            on_progress(result, kept, total)
        finally:
            # Interrupted (Ctrl-C, an error): the threads stop waiting within a slice and
            # the runs go on; what they had not kept is graded by `--resume`.
            self._stopping.set()
            pool.shutdown(wait=True, cancel_futures=True)

    def _submitter(self, case: EvalCase) -> Callable[[Client, str], str]:
        run = self.suite.run
        budget = {"max_cost_usd": run.budget_usd} if run.budget_usd else None
        common: RunOptions = {
            "inputs": case.inputs or None,
            "timeout_s": run.timeout_s,
            "budget": budget,
            "budget_tokens": run.budget_tokens,
            "response_cache": run.response_cache or None,
        }
        if self.plan is not None:
            plan = self.plan
            return lambda client, key: client.submit(plan, idempotency_key=key, **common).run_id
        goal = case.goal or self.suite.goal or ""
        context = case.context if case.context is not None else (self.suite.context or "")
        options: RunOptions = {
            **common,
            "goal": goal,
            "context": context,
            "max_nodes": run.max_nodes,
            "worker_types": run.worker_types,
        }
        return lambda client, key: client.submit(idempotency_key=key, **options).run_id

    def run_case(self, record: EvalRecord, job: CaseJob) -> CaseResult:
        """Run one case (or follow the run a previous driver started) and grade it."""
        key = f"eval:{record.id}:{job.key}"
        try:
            run_id = job.submit(self.client, key)
        except DagwrightError as exc:
            return self._unrun(job, f"the run could not start: {exc}")
        if not self._ended_in_time(run_id):
            self.client.cancel(run_id, CANCEL_REASON)
            self.client.wait(run_id, CANCEL_WAIT_S)
        outcome = read_outcome(self.client, run_id, job.case.run_input(self.suite))
        return self.grader.graded(job.case, job.repeat, run_id, outcome)

    def _ended_in_time(self, run_id: str) -> bool:
        """Wait for the run to end, at most ``case_timeout_s``: whether it did. Waits in
        slices, so that an interrupted eval's threads stop at once (EvalInterrupted)."""
        deadline = time.monotonic() + self.options.case_timeout_s
        while not self._stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self.client.wait(run_id, min(left, WAIT_SLICE_S))
                return True
            except RunNotFinishedError:
                continue
        raise EvalInterrupted(run_id)

    def _unrun(self, job: CaseJob, reason: str) -> CaseResult:
        scores = [failed_score(s, reason) for s in self.suite.scorers_of(job.case)]
        return CaseResult(
            case=job.case.name, repeat=job.repeat, status="error", scores=scores, error=reason
        )


def evaluate(
    client: Client,
    suite: EvalSuite | str | Path,
    options: EvalOptions | None = None,
    *,
    on_progress: ProgressCallback | None = None,
) -> EvalReport:
    """Run an eval of ``suite`` (an EvalSuite, or the path of a suite file) on the client's
    stack and return its report: what ``dagwright eval`` does, from Python."""
    from dagwright.evals.suite import load_suite

    options = options or EvalOptions()
    if isinstance(suite, EvalSuite):
        runner = EvalRunner(client, suite, options, suite_dir=Path.cwd())
    else:
        path = Path(suite)
        loaded = load_suite(path, max_bytes=client.settings.limits.max_plan_file_bytes)
        runner = EvalRunner(client, loaded, options, suite_dir=path.parent, suite_file=str(path))
    return runner.run(on_progress=on_progress)


def eval_store(client: Client) -> EvalStore:
    """The evals of the client's stack."""
    runtime = client.runtime
    return EvalStore(runtime.client, runtime.keys, client.settings.evals.retention_s)


def resume_runner(
    client: Client,
    eval_id: str,
    *,
    parallel: int | None = None,
    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S,
) -> tuple[EvalRunner, EvalRecord]:
    """A runner of an eval that was interrupted, from its record alone (no suite file):
    its cases, repeats and changes as it started; only how it waits may differ."""
    record = eval_store(client).record(eval_id)
    if record.status == "finished":
        raise InputError(f"eval {eval_id} has finished; `dagwright evals show {eval_id}`")
    suite = parse_suite(record.suite_data, source=f"eval {eval_id}")
    changes = record.changes
    options = EvalOptions(
        repeat=record.repeat,
        model=changes.get("model"),
        sets=list(changes.get("set", [])),
        cases=list(record.cases),
        parallel=parallel,
        case_timeout_s=case_timeout_s,
        baseline=record.baseline,
    )
    runner = EvalRunner(
        client,
        suite,
        options,
        suite_dir=Path("."),
        suite_file=record.suite_file,
        plan_data=record.plan_data,
    )
    return runner, record


def _now() -> datetime:
    return datetime.now(UTC)
