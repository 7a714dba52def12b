"""An eval suite: what to run, the cases to run it on, and the scorers that grade each case.

A suite is a YAML or JSON file, read as safely and as boundedly as a plan file
(``plans/documents.py``) and validated into ``EvalSuite``; its problems are collected, one
line each (``SuiteError``), as a plan's are. A scorer is written as a mapping of one key,
its kind, whose value is either the scorer's one argument (``contains: Paris``) or a
mapping of its options (``contains: {value: paris, ignore_case: true, node: write}``):

    scorers:
      - contains: Paris
      - judge: {rubric: "Answers the question in one sentence", pass_score: 4}
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from dagwright.errors import PlanError
from dagwright.models import MAX_DURATION_S, NODE_ID_PATTERN

SUITE_MODEL_CONFIG = ConfigDict(
    frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True
)
NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
MAX_CASES = 1000
MAX_SCORERS = 50  # per case and per suite
MAX_TEXT_CHARS = 20_000  # a rubric, a goal, a context, an expected text
MAX_REPEAT = 20


class SuiteError(PlanError):
    """An eval suite file is malformed or invalid: ``problems``, one line each."""


class ScorerOptions(BaseModel):
    """What every scorer may say besides its own arguments."""

    model_config = SUITE_MODEL_CONFIG
    kind: ClassVar[str]

    name: str | None = Field(None, pattern=NAME_PATTERN)
    """The scorer's name in tables and baselines; default: its kind (and its argument)."""
    node: str | None = Field(None, pattern=NODE_ID_PATTERN)
    """Grade this node's output instead of the run's result."""
    path: str | None = Field(None, max_length=200, pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
    """A dotted path into the graded JSON (``summary``, ``items.0.title``)."""
    tolerance: float | None = Field(None, ge=0.0, le=1.0)
    """How far this scorer's mean may fall below a baseline's before it is a regression
    (default: ``--tolerance``)."""

    def label(self) -> str:
        """The name tables and baselines key this scorer by."""
        return self.name or self.default_label()

    def default_label(self) -> str:
        return self.kind

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as a suite file writes it, ``{kind: {options}}``: a dumped suite parses
        back, and two kinds of equal options dump differently."""
        return {self.kind: handler(self)}


class ValueScorer(ScorerOptions):
    """A scorer of one main argument (``value``): written ``kind: VALUE`` or as a mapping."""

    shorthand: ClassVar[str] = "value"

    def default_label(self) -> str:
        shown = getattr(self, self.shorthand)
        text = shown if isinstance(shown, str) else json.dumps(shown, sort_keys=True)
        text = " ".join(str(text).split())
        return f"{self.kind}:{text[:24]}" + ("…" if len(text) > 24 else "")


class Equals(ValueScorer):
    """The graded value equals ``value`` (JSON equality; text compared as given)."""

    kind: ClassVar[str] = "equals"
    value: Any
    ignore_case: bool = False
    """Text compared without regard to case."""


class Contains(ValueScorer):
    """The graded text contains ``value``."""

    kind: ClassVar[str] = "contains"
    value: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    ignore_case: bool = False


class NotContains(Contains):
    """The graded text does not contain ``value``."""

    kind: ClassVar[str] = "not_contains"


class Regex(ValueScorer):
    """The graded text matches ``pattern`` somewhere (RE2 syntax: no backtracking)."""

    kind: ClassVar[str] = "regex"
    shorthand: ClassVar[str] = "pattern"
    pattern: str = Field(min_length=1, max_length=2000)
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        from dagwright.json_schemas import PatternError, compiled_pattern

        try:
            compiled_pattern(pattern)
        except PatternError as exc:
            raise ValueError(f"RE2 cannot use the pattern: {exc}") from None
        return pattern


class JsonSchemaScorer(ValueScorer):
    """The graded value is valid against ``schema`` (Draft 2020-12, nothing fetched)."""

    kind: ClassVar[str] = "json_schema"
    shorthand: ClassVar[str] = "schema_"
    schema_: dict[str, Any] = Field(alias="schema")

    @field_validator("schema_")
    @classmethod
    def _usable(cls, schema: dict[str, Any]) -> dict[str, Any]:
        from dagwright.json_schemas import schema_problems

        problems = schema_problems(schema, "schema")
        if problems:
            raise ValueError(problems[0])
        return schema

    def default_label(self) -> str:
        return self.kind


class NumberRange(ScorerOptions):
    """The graded value is a number (or text that is one) within ``[min, max]``."""

    kind: ClassVar[str] = "number"
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _a_range(self) -> NumberRange:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class FunctionScorer(ValueScorer):
    """A registered function (``@dagwright.function``, as function nodes use) grades the
    value: called with ``output``, ``case`` (its name, inputs, goal) and ``params``; it
    returns a bool, a number in [0, 1] (passed from ``pass_at``), or a mapping
    ``{score, passed, reason}``."""

    kind: ClassVar[str] = "function"
    shorthand: ClassVar[str] = "function"
    function: str = Field(min_length=1, max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    pass_at: float = Field(1.0, ge=0.0, le=1.0)


class ToolCalled(ValueScorer):
    """The run's agents called ``tool`` (at least ``min_times``), read from its audit and
    trace: what ran, not what a model said it did."""

    kind: ClassVar[str] = "tool_called"
    shorthand: ClassVar[str] = "tool"
    tool: str = Field(min_length=1, max_length=200)
    min_times: int = Field(1, ge=1)


class ToolNotCalled(ValueScorer):
    """No agent of the run called ``tool`` (a refused call counts as a call)."""

    kind: ClassVar[str] = "tool_not_called"
    shorthand: ClassVar[str] = "tool"
    tool: str = Field(min_length=1, max_length=200)


class NodeTypeRan(ValueScorer):
    """A node of worker type ``type`` ran in the run (planned runs included)."""

    kind: ClassVar[str] = "node_type_ran"
    shorthand: ClassVar[str] = "type"
    type: str = Field(min_length=1, max_length=64)


class NodeTypeNotRan(NodeTypeRan):
    """No node of worker type ``type`` ran."""

    kind: ClassVar[str] = "node_type_not_ran"


class MaxCost(ValueScorer):
    """The run's LLM calls cost at most ``usd`` (an unpriced model fails it)."""

    kind: ClassVar[str] = "max_cost_usd"
    shorthand: ClassVar[str] = "usd"
    usd: float = Field(ge=0)


class MaxDuration(ValueScorer):
    """The run took at most ``seconds``, from its submission to its end."""

    kind: ClassVar[str] = "max_duration_s"
    shorthand: ClassVar[str] = "seconds"
    seconds: float = Field(gt=0, le=MAX_DURATION_S)


class MaxTokens(ValueScorer):
    """The run's LLM calls used at most ``tokens`` in all (input, output, cache)."""

    kind: ClassVar[str] = "max_tokens"
    shorthand: ClassVar[str] = "tokens"
    tokens: int = Field(ge=0)


class NoDeadLetters(ValueScorer):
    """No node of the run ended in the dead-letter queue."""

    kind: ClassVar[str] = "no_dead_letters"
    shorthand: ClassVar[str] = "enabled"
    enabled: Literal[True] = True

    def default_label(self) -> str:
        return self.kind


class Succeeded(ValueScorer):
    """The run succeeded (every scorer of a failed run fails too; this one names it)."""

    kind: ClassVar[str] = "succeeded"
    shorthand: ClassVar[str] = "enabled"
    enabled: Literal[True] = True

    def default_label(self) -> str:
        return self.kind


class Judge(ScorerOptions):
    """An LLM grades the output against ``rubric`` on a scale. Its verdict is cached by
    (rubric, scale, case input, output, judge model): an unchanged output is not paid twice.
    The output it reads is fenced as untrusted data."""

    kind: ClassVar[str] = "judge"
    rubric: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    """What a good output does, as the judge should grade it."""
    scale: tuple[int, int] = (1, 5)
    """The lowest and highest grade."""
    pass_score: int | None = None
    """The lowest grade that passes (default: the top of the scale)."""
    model: str | None = Field(None, min_length=1, max_length=200)
    """The judge's model (default: ``eval_judge_model``)."""
    include_input: bool = True
    """Show the judge the case's inputs and goal, not only the output."""
    expected: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    """A reference answer the judge compares the output with."""

    @model_validator(mode="after")
    def _a_scale(self) -> Judge:
        low, high = self.scale
        if not 0 <= low < high <= 100:
            raise ValueError(f"scale {low}..{high}: give two grades, 0 <= low < high <= 100")
        if self.pass_score is not None and not low <= self.pass_score <= high:
            raise ValueError(f"pass_score {self.pass_score} is outside the scale {low}..{high}")
        return self

    @property
    def passing_grade(self) -> int:
        return self.scale[1] if self.pass_score is None else self.pass_score

    def default_label(self) -> str:
        return "judge:" + hashlib.sha256(self.rubric.encode()).hexdigest()[:6]


ScorerSpecs = list[SerializeAsAny[ScorerOptions]]
"""Scorers of several kinds, each dumped with its own fields."""

SCORER_KINDS: dict[str, type[ScorerOptions]] = {
    kind.kind: kind
    for kind in (
        Equals,
        Contains,
        NotContains,
        Regex,
        JsonSchemaScorer,
        NumberRange,
        FunctionScorer,
        ToolCalled,
        ToolNotCalled,
        NodeTypeRan,
        NodeTypeNotRan,
        MaxCost,
        MaxDuration,
        MaxTokens,
        NoDeadLetters,
        Succeeded,
        Judge,
    )
}
OUTPUT_SCORERS = frozenset(
    {"equals", "contains", "not_contains", "regex", "json_schema", "number", "function", "judge"}
)
"""The kinds that grade an output (the others read the run's record)."""


def scorer_from(entry: Any) -> ScorerOptions:
    """A scorer from its one-key mapping (``{contains: x}`` or ``{contains: {value: x}}``)."""
    if isinstance(entry, ScorerOptions):
        return entry
    if not isinstance(entry, dict) or len(entry) != 1:
        raise ValueError(
            "a scorer is a mapping of one key, its kind (e.g. `contains: Paris`); kinds: "
            + ", ".join(SCORER_KINDS)
        )
    [(kind, argument)] = entry.items()
    scorer_type = SCORER_KINDS.get(str(kind))
    if scorer_type is None:
        raise ValueError(f"no scorer kind {str(kind)[:40]!r}; kinds: {', '.join(SCORER_KINDS)}")
    shorthand = getattr(scorer_type, "shorthand", None)
    if shorthand is None:
        if not isinstance(argument, dict):
            raise ValueError(f"`{kind}` takes a mapping of its options")
        return scorer_type.model_validate(argument)
    key = scorer_type.model_fields[shorthand].alias or shorthand
    if isinstance(argument, dict) and key in argument:  # the options, its argument among them
        return scorer_type.model_validate(argument)
    return scorer_type.model_validate({key: argument})


class EvalCase(BaseModel):
    """One case: a run of the suite's plan (with these inputs) or of a goal."""

    model_config = SUITE_MODEL_CONFIG

    name: str = Field(pattern=NAME_PATTERN)
    """Unique in the suite: lowercase letters, digits, ``_``, ``-`` and ``.``."""
    inputs: dict[str, Any] = Field(default_factory=dict)
    """The run's inputs (checked against the plan's ``inputs:`` schema)."""
    goal: str | None = Field(None, min_length=1, max_length=MAX_TEXT_CHARS)
    """The goal the planner plans (goal suites): this case's, else the suite's."""
    context: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    """What the planner and every agent are told besides the goal (goal suites)."""
    tags: list[str] = Field(default_factory=list, max_length=20)
    """Labels ``--tag`` picks cases by."""
    scorers: ScorerSpecs = Field(default_factory=list, max_length=MAX_SCORERS)
    """Scorers of this case alone, after the suite's."""

    @model_validator(mode="before")
    @classmethod
    def _scorers_parsed(cls, data: Any) -> Any:
        return _parse_scorers(data)

    def run_input(self, suite: EvalSuite) -> dict[str, Any]:
        """What the case gives its run, as a judge and a baseline see it."""
        shown: dict[str, Any] = {"inputs": self.inputs}
        goal = self.goal or suite.goal
        if goal:
            shown["goal"] = goal
        context = self.context if self.context is not None else suite.context
        if context:
            shown["context"] = context
        return shown


class RunSettings(BaseModel):
    """How each case's run is submitted (``Client.submit``'s options)."""

    model_config = SUITE_MODEL_CONFIG

    budget_usd: float | None = Field(None, gt=0)
    """Most each case's run may spend on LLM calls."""
    budget_tokens: int | None = Field(None, ge=1)
    """Most tokens each case's run may use."""
    timeout_s: float | None = Field(None, gt=0, le=MAX_DURATION_S)
    """Each case's run's wall-clock limit."""
    response_cache: bool = False
    """Answer the runs' agent calls from the cross-run response cache when the very same
    request was answered before (0 tokens): a re-run of an unchanged suite costs nothing,
    but ``--repeat`` then measures no spread."""
    max_nodes: int | None = Field(None, ge=1)
    """Goal suites: the largest plan the planner may make."""
    worker_types: list[str] | None = None
    """Goal suites: the worker types the planner may use."""


class EvalSuite(BaseModel):
    """A suite file: a plan (or a goal), the cases, the scorers."""

    model_config = SUITE_MODEL_CONFIG

    name: str = Field(pattern=NAME_PATTERN)
    """The suite's name: evals of it are compared with one another."""
    description: str = Field("", max_length=MAX_TEXT_CHARS)
    plan: str | None = Field(None, min_length=1, max_length=1000)
    """The plan file every case runs, relative to the suite file."""
    goal: str | None = Field(None, min_length=1, max_length=MAX_TEXT_CHARS)
    """The goal every case runs (cases may give their own), planned by the planner."""
    context: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    run: RunSettings = Field(default_factory=RunSettings)
    parallel: int = Field(4, ge=1, le=64)
    """How many cases run at once."""
    scorers: ScorerSpecs = Field(default_factory=list, max_length=MAX_SCORERS)
    """Scorers of every case."""
    cases: list[EvalCase] = Field(min_length=1, max_length=MAX_CASES)

    @model_validator(mode="before")
    @classmethod
    def _scorers_parsed(cls, data: Any) -> Any:
        return _parse_scorers(data)

    @model_validator(mode="after")
    def _runnable(self) -> EvalSuite:
        if self.plan and self.goal:
            raise ValueError("give `plan` or `goal`, not both")
        if not self.plan and not self.goal and not all(case.goal for case in self.cases):
            raise ValueError("give `plan`, or a `goal` (the suite's, or every case's own)")
        if self.plan and any(case.goal for case in self.cases):
            raise ValueError("a case of a plan suite gives inputs, not a goal")
        names = [case.name for case in self.cases]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"case names must be unique: {', '.join(twice)}")
        for case in self.cases:
            labels = [scorer.label() for scorer in self.scorers_of(case)]
            again = sorted({label for label in labels if labels.count(label) > 1})
            if again:
                raise ValueError(
                    f"case {case.name!r}: two scorers named {again[0]!r}: give one a `name:`"
                )
        if not any(self.scorers_of(case) for case in self.cases):
            raise ValueError("no scorer: give `scorers:` to the suite or its cases")
        return self

    def scorers_of(self, case: EvalCase) -> list[ScorerOptions]:
        """The suite's scorers, then the case's own."""
        return [*self.scorers, *case.scorers]

    def picked(self, names: list[str] | None, tags: list[str] | None) -> list[EvalCase]:
        """The cases named, or tagged with one of ``tags`` (all when neither is given)."""
        cases = self.cases
        if names:
            unknown = sorted(set(names) - {case.name for case in cases})
            if unknown:
                raise SuiteError([f"no case named {unknown[0]!r} in suite {self.name!r}"])
            cases = [case for case in cases if case.name in names]
        if tags:
            cases = [case for case in cases if set(case.tags) & set(tags)]
            if not cases:
                raise SuiteError([f"no case of suite {self.name!r} is tagged {', '.join(tags)}"])
        return cases


def _parse_scorers(data: Any) -> Any:
    """``data`` with its ``scorers:`` list parsed, a bad entry's problem named by its index."""
    if not isinstance(data, dict) or not isinstance(data.get("scorers"), list):
        return data
    parsed = []
    for index, entry in enumerate(data["scorers"]):
        try:
            parsed.append(scorer_from(entry))
        except ValidationError as exc:
            kind = next(iter(entry)) if isinstance(entry, dict) else "?"
            problem = describe_suite_errors(exc)[0].removeprefix("suite: ")
            raise ValueError(f"scorers.{index} ({str(kind)[:40]}): {problem}") from None
        except ValueError as exc:
            raise ValueError(f"scorers.{index}: {exc}") from None
    return {**data, "scorers": parsed}


def parse_suite(data: Any, *, source: str | None = None) -> EvalSuite:
    """Validate plain data (as read from YAML or JSON) into an EvalSuite."""
    if not isinstance(data, dict):
        found = type(data).__name__ if data is not None else "nothing"
        raise SuiteError([f"a suite is a mapping with `cases:`; found {found}"], source=source)
    try:
        return EvalSuite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(describe_suite_errors(exc), source=source) from None


def describe_suite_errors(exc: ValidationError) -> list[str]:
    """pydantic errors as lines naming where (``cases.2.scorers.0``) and what to fix."""
    lines = []
    for error in exc.errors():
        where = ".".join(str(part)[:60] for part in error["loc"]) or "suite"
        message = (
            "unknown field (check its spelling)"
            if error["type"] == "extra_forbidden"
            else " ".join(str(error["msg"]).removeprefix("Value error, ").split())
        )
        lines.append(f"{where}: {message}")
    return lines


def load_suite(path: str | Path, *, max_bytes: int) -> EvalSuite:
    """Read a suite file: ``.json`` as JSON, anything else as YAML, at most ``max_bytes``."""
    from dagwright.plans.documents import parse_plan_text, read_plan_text

    source, path = str(path), Path(path)
    try:
        text = read_plan_text(path, max_bytes, "DAGWRIGHT_MAX_PLAN_FILE_BYTES")
        data = parse_plan_text(text, json_file=path.suffix.lower() == ".json")
    except FileNotFoundError:
        raise SuiteError([f"no such suite file: {source}"]) from None
    except PlanError as exc:
        raise SuiteError(exc.problems, source=source) from None
    return parse_suite(data, source=source)


def suite_digest(suite: EvalSuite) -> str:
    """What identifies a suite's content: evals of equal digests ran the same cases."""
    text = json.dumps(suite.model_dump(mode="json", by_alias=True), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
