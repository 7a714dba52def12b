"""What an eval found: each case run's scores, and the eval's record and statistics.

An eval (one ``dagwright eval`` of a suite) has an id, a record (``EvalRecord``: the suite
as run, the options that changed it, when, its state) and one ``CaseResult`` per case and
repeat. Outputs are kept with the result (cut to ``MAX_KEPT_OUTPUT_CHARS``, with the digest
of the whole), so that an eval stays comparable as a baseline after its runs expire.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_KEPT_OUTPUT_CHARS = 20_000
EVAL_ID_PREFIX = "ev_"

EvalStatus = Literal["running", "finished", "interrupted"]


class Score(BaseModel):
    """One scorer's grade of one case run."""

    model_config = ConfigDict(frozen=True)

    scorer: str
    """The scorer's name (its label in the suite)."""
    kind: str
    value: float | None
    """The grade in [0, 1] (a judge's grade scaled); None: it could not be graded."""
    passed: bool
    reason: str = ""
    """Why, in a line: what was expected and found, or the judge's reason."""
    grade: float | None = None
    """A judge's grade on its own scale, or the number a ``number`` scorer read."""
    cached: bool | None = None
    """A judge's verdict came from the verdict cache (no request, 0 tokens)."""
    tokens: int = 0
    """Tokens a judge's request used (0 when cached)."""
    cost_usd: float = 0.0


class CaseResult(BaseModel):
    """One run of one case: its run, its output, its scores."""

    model_config = ConfigDict(frozen=True)

    case: str
    repeat: int = Field(ge=0)
    """Which of the ``--repeat`` runs of the case (0-based)."""
    run_id: str | None = None
    """None when the run could not be started (``error`` says why)."""
    status: str
    """The run's end: ``succeeded``, ``failed``, ``cancelled``; ``error`` if none ran."""
    output: str = ""
    """The graded output as text (JSON for structured ones), cut to MAX_KEPT_OUTPUT_CHARS."""
    output_sha256: str = ""
    """Digest of the whole output text: equal outputs, equal digests."""
    cost_usd: float | None = None
    """What the run's LLM calls cost (None: some model is unpriced)."""
    tokens: int = 0
    duration_s: float | None = None
    scores: list[Score] = Field(default_factory=list)
    error: str | None = None
    """Why the run failed or could not start, in a line."""

    @property
    def key(self) -> str:
        return result_key(self.case, self.repeat)

    def score(self, scorer: str) -> Score | None:
        return next((score for score in self.scores if score.scorer == scorer), None)


def result_key(case: str, repeat: int) -> str:
    """A result's field in the eval's results hash."""
    return f"{case}#{repeat}"


def kept_output(output: Any) -> tuple[str, str]:
    """An output as kept with its result: its text (cut) and the digest of all of it."""
    text = output if isinstance(output, str) else json.dumps(output, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return text[:MAX_KEPT_OUTPUT_CHARS], digest


class EvalRecord(BaseModel):
    """One eval of a suite: what ran and how it went (its results are kept beside it)."""

    model_config = ConfigDict(frozen=True)

    id: str
    suite: str
    """The suite's name."""
    suite_digest: str
    """What the suite held when it ran (``suite.suite_digest``)."""
    suite_file: str = ""
    """The suite file as it was given, for people."""
    started_at: datetime
    finished_at: datetime | None = None
    status: EvalStatus = "running"
    cases: list[str]
    """The cases run, in the suite's order."""
    scorers: dict[str, list[str]]
    """Each case's scorers' names, in order."""
    repeat: int = Field(1, ge=1)
    changes: dict[str, Any] = Field(default_factory=dict)
    """What was changed for this eval without editing files: ``model``, ``set``."""
    baseline: str | None = None
    """The eval or file it was compared with, if any."""
    suite_data: dict[str, Any] = Field(default_factory=dict)
    """The suite as it ran (its JSON), so a later look or a resume needs no file."""
    plan_data: dict[str, Any] | None = None
    """The plan its cases ran, as ``--model``/``--set`` changed it (plan suites)."""


class ScorerStats(BaseModel):
    """One scorer over an eval's case runs (or one case's repeats)."""

    model_config = ConfigDict(frozen=True)

    scorer: str
    runs: int
    """Case runs graded (those whose grade is None count as failed, not in the mean)."""
    passed: int
    mean: float | None
    stdev: float | None
    """Spread of the grades (None with fewer than two)."""

    @property
    def pass_rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0


def scorer_stats(scorer: str, results: list[CaseResult]) -> ScorerStats:
    """``scorer``'s statistics over ``results`` (those that have it)."""
    scores = [score for result in results if (score := result.score(scorer)) is not None]
    values = [score.value for score in scores if score.value is not None]
    return ScorerStats(
        scorer=scorer,
        runs=len(scores),
        passed=sum(score.passed for score in scores),
        mean=statistics.fmean(values) if values else None,
        stdev=statistics.stdev(values) if len(values) > 1 else None,
    )


def scorer_names(record: EvalRecord) -> list[str]:
    """Every scorer of the eval, in first-seen order."""
    names: dict[str, None] = {}
    for case in record.cases:
        names.update(dict.fromkeys(record.scorers.get(case, [])))
    return list(names)


class EvalReport(BaseModel):
    """An eval with its results: what ``--json``, the API and the dashboard show."""

    model_config = ConfigDict(frozen=True)

    record: EvalRecord
    results: list[CaseResult]

    def results_of(self, case: str) -> list[CaseResult]:
        return sorted(
            (result for result in self.results if result.case == case),
            key=lambda result: result.repeat,
        )

    def stats(self) -> list[ScorerStats]:
        """Each scorer over every case run."""
        return [scorer_stats(name, self.results) for name in scorer_names(self.record)]

    def case_stats(self, case: str) -> list[ScorerStats]:
        """Each of ``case``'s scorers over its repeats."""
        runs = self.results_of(case)
        return [scorer_stats(name, runs) for name in self.record.scorers.get(case, [])]

    def total_cost_usd(self) -> float | None:
        costs = [result.cost_usd for result in self.results]
        return None if any(cost is None for cost in costs) else sum(c or 0.0 for c in costs)

    def judge_cost_usd(self) -> float:
        return sum(score.cost_usd for result in self.results for score in result.scores)

    def judge_requests(self) -> tuple[int, int]:
        """(verdicts asked of the judge model, verdicts read from the cache)."""
        judged = [s for r in self.results for s in r.scores if s.cached is not None]
        return sum(not s.cached for s in judged), sum(bool(s.cached) for s in judged)
