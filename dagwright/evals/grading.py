"""Grading a case run: every scorer's grade, the LLM judge's through its cache, and the
grades written back as scores of the run.

A ``CaseGrader`` serves one eval's case threads: the deterministic and behaviour scorers
are ``scorers.py``'s, the judge's LLM is built once (the agents' layer: breakers, rate
limits, wire rules) on first use, and a judge that fails (an API error, an open breaker)
fails its score, not the eval.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING

from dagwright.errors import DagwrightError
from dagwright.evals.results import CaseResult, EvalRecord, Score, kept_output
from dagwright.evals.scorers import Ungradable, failed_score, grade, graded_value
from dagwright.evals.suite import EvalCase, EvalSuite, Judge

if TYPE_CHECKING:
    from dagwright.client import Client
    from dagwright.evals.outcomes import CaseOutcome
    from dagwright.llm.protocol import LLM

log = logging.getLogger(__name__)


class CaseGrader:
    """Grades the case runs of one eval of ``suite`` (thread-safe)."""

    def __init__(self, client: Client, suite: EvalSuite) -> None:
        self.client = client
        self.suite = suite
        self._judge_llm: LLM | None = None
        self._judge_lock = threading.Lock()

    def check_judge(self, cases: list[EvalCase]) -> None:
        """Fail now, before any run, if a judge scorer of ``cases`` has no LLM endpoint to
        ask or names a retired model (one near its end of life is warned of)."""
        from dagwright.llm.model_lifecycle import warn_of_end_of_life

        judges = [s for c in cases for s in self.suite.scorers_of(c) if isinstance(s, Judge)]
        if judges:
            models = {judge.model or self.default_judge_model for judge in judges}
            warn_of_end_of_life(models, self.client.settings)
            self.judge_llm()

    @property
    def default_judge_model(self) -> str:
        """The model of a judge that names none."""
        settings = self.client.settings
        return settings.evals.judge_model or settings.llm.default_model

    def judge_llm(self) -> LLM:
        with self._judge_lock:
            if self._judge_llm is None:
                from dagwright.llm import build_llm

                runtime = self.client.runtime
                self._judge_llm = build_llm(
                    self.client.settings.llm, runtime.client, runtime.keys, runtime.breakers
                )
            return self._judge_llm

    def graded(self, case: EvalCase, repeat: int, run_id: str, outcome: CaseOutcome) -> CaseResult:
        """The case run's result: its output kept, every scorer's grade."""
        functions = self.client.runtime.registry.functions
        scores = [
            self._judged(scorer, outcome)
            if isinstance(scorer, Judge)
            else grade(scorer, outcome, functions=functions)
            for scorer in self.suite.scorers_of(case)
        ]
        text, digest = kept_output(outcome.output) if outcome.succeeded else ("", "")
        return CaseResult(
            case=case.name,
            repeat=repeat,
            run_id=run_id,
            status=outcome.state.status.value,
            output=text,
            output_sha256=digest,
            cost_usd=outcome.cost_usd,
            tokens=outcome.tokens,
            duration_s=outcome.duration_s,
            scores=scores,
            error=None if outcome.succeeded else outcome.failure(),
        )

    def _judged(self, judge: Judge, outcome: CaseOutcome) -> Score:
        from dagwright.evals.judge import judge_output, judge_score

        if not outcome.succeeded:
            return failed_score(judge, outcome.failure())
        try:
            output = graded_value(judge, outcome)
        except Ungradable as exc:
            return failed_score(judge, str(exc))
        runtime, settings = self.client.runtime, self.client.settings
        try:
            verdict = judge_output(
                judge,
                case_input=outcome.run_input,
                output=output,
                llm=self.judge_llm(),
                redis_client=runtime.client,
                keys=runtime.keys,
                default_model=self.default_judge_model,
                ttl_s=settings.evals.judge_cache_ttl_s,
            )
        except DagwrightError as exc:  # the judge's failure is this score's, not the eval's
            return failed_score(judge, f"the judge failed: {exc}")
        return judge_score(judge, verdict)

    def score_run(self, record: EvalRecord, result: CaseResult) -> None:
        """The case run's grades, as scores of the run (source ``eval:<id>``): its page
        says how the eval graded it. Written after the result is kept, so at most once;
        a run that expired meanwhile keeps none."""
        if result.run_id is None:
            return
        for score in result.scores:
            try:
                self.client.score(
                    result.run_id,
                    run_score_name(score.scorer),
                    0.0 if score.value is None else score.value,
                    f"{'passed' if score.passed else 'failed'}: {score.reason}"[:2000],
                    source=f"eval:{record.id}",
                    by=f"eval of {record.suite}"[:128],
                )
            except DagwrightError as exc:
                log.warning("eval %s: run %s keeps no score: %s", record.id, result.run_id, exc)
                return


def run_score_name(scorer: str) -> str:
    """A scorer's name as a run score's (lowercase letters, digits, ``_.-``, at most 64):
    ``contains:XADD`` is ``contains-xadd``."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", scorer.lower()).strip("-._")
    return (slug or "score")[:64]
