"""The deterministic and behaviour scorers: a case run's outcome in, a ``Score`` out.

Pure functions of the outcome (``outcomes.py``), but for ``function`` scorers, which call
the user's registered function. The LLM judge is ``judge.py``'s. An output scorer grades
the run's result, or the output of its ``node:``, at its ``path:``; text scorers read a
text output as it is and any other as compact JSON. Every output scorer of a run that did
not succeed fails, saying why: a failed run has no answer to grade.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dagwright.evals.results import Score
from dagwright.evals.suite import (
    OUTPUT_SCORERS,
    Contains,
    Equals,
    FunctionScorer,
    JsonSchemaScorer,
    MaxCost,
    MaxDuration,
    MaxTokens,
    NoDeadLetters,
    NodeTypeNotRan,
    NodeTypeRan,
    NotContains,
    NumberRange,
    Regex,
    ScorerOptions,
    Succeeded,
    ToolCalled,
    ToolNotCalled,
)

if TYPE_CHECKING:
    from dagwright.evals.outcomes import CaseOutcome
    from dagwright.workers.function_registry import FunctionRegistry

SHOWN_CHARS = 60  # of a value quoted in a reason


class Ungradable(Exception):
    """The scorer cannot read what it grades (no such node or path): a failed score."""


def graded_value(scorer: ScorerOptions, outcome: CaseOutcome) -> Any:
    """What an output scorer grades: the result (or ``node``'s output) at ``path``."""
    try:
        value = outcome.output if scorer.node is None else outcome.node_output(scorer.node)
    except LookupError as exc:
        raise Ungradable(str(exc)) from None
    for step in (scorer.path or "").split(".") if scorer.path else []:
        value = _step(value, step, scorer.path or "")
    return value


def _step(value: Any, step: str, path: str) -> Any:
    if isinstance(value, dict) and step in value:
        return value[step]
    if isinstance(value, list) and step.isdigit() and int(step) < len(value):
        return value[int(step)]
    raise Ungradable(f"the output has no {path!r} (stopped at {step!r})")


def as_text(value: Any) -> str:
    """A graded value as text: a string as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def shown(value: Any) -> str:
    text = " ".join(as_text(value).split())
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def score_of(scorer: ScorerOptions, passed: bool, reason: str, **extra: Any) -> Score:
    return Score(
        scorer=scorer.label(),
        kind=scorer.kind,
        value=extra.pop("value", 1.0 if passed else 0.0),
        passed=passed,
        reason=reason,
        **extra,
    )


def failed_score(scorer: ScorerOptions, reason: str) -> Score:
    """A scorer that could not grade: no value, not passed."""
    return Score(scorer=scorer.label(), kind=scorer.kind, value=None, passed=False, reason=reason)


def grade(
    scorer: ScorerOptions, outcome: CaseOutcome, *, functions: FunctionRegistry | None = None
) -> Score:
    """``scorer``'s grade of ``outcome`` (any kind but ``judge``)."""
    if scorer.kind in OUTPUT_SCORERS and not outcome.succeeded:
        return failed_score(scorer, outcome.failure())
    try:
        if isinstance(scorer, FunctionScorer):
            return _function(scorer, outcome, functions)
        return GRADERS[type(scorer)](scorer, outcome)
    except Ungradable as exc:
        return failed_score(scorer, str(exc))


def _equals(scorer: Equals, outcome: CaseOutcome) -> Score:
    value = graded_value(scorer, outcome)
    wanted = scorer.value
    if scorer.ignore_case and isinstance(value, str) and isinstance(wanted, str):
        value, wanted = value.casefold(), wanted.casefold()
    passed = value == wanted
    reason = "equal" if passed else f"expected {shown(scorer.value)}, got {shown(value)}"
    return score_of(scorer, passed, reason)


def _contains(scorer: Contains, outcome: CaseOutcome) -> Score:
    text, wanted = as_text(graded_value(scorer, outcome)), scorer.value
    if scorer.ignore_case:
        text, wanted = text.casefold(), wanted.casefold()
    found = wanted in text
    passed = not found if isinstance(scorer, NotContains) else found
    verb = "contains" if found else "does not contain"
    return score_of(scorer, passed, f"the output {verb} {shown(scorer.value)}")


def _regex(scorer: Regex, outcome: CaseOutcome) -> Score:
    from dagwright.json_schemas import TooMuchMatchingError, matches

    pattern = f"(?i){scorer.pattern}" if scorer.ignore_case else scorer.pattern
    try:
        found = matches(pattern, as_text(graded_value(scorer, outcome)))
    except TooMuchMatchingError:
        raise Ungradable("the output is too long to match the pattern against") from None
    verb = "matches" if found else "does not match"
    return score_of(scorer, found, f"the output {verb} /{shown(scorer.pattern)}/")


def _json_schema(scorer: JsonSchemaScorer, outcome: CaseOutcome) -> Score:
    from dagwright.json_schemas import schema_errors, schema_validator

    value = graded_value(scorer, outcome)
    if isinstance(value, str):  # an agent's text answer that is JSON
        try:
            value = json.loads(value)
        except ValueError:
            return score_of(scorer, False, "the output is text, not JSON")
    errors = schema_errors(schema_validator(scorer.schema_), value)
    if not errors:
        return score_of(scorer, True, "valid")
    first = errors[0]
    where = "/".join(str(part) for part in first.absolute_path) or "the output"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return score_of(scorer, False, f"{where}: {' '.join(first.message.split())[:160]}{more}")


def _number(scorer: NumberRange, outcome: CaseOutcome) -> Score:
    value = graded_value(scorer, outcome)
    number = _as_number(value)
    if number is None:
        return score_of(scorer, False, f"not a number: {shown(value)}")
    low = -math.inf if scorer.min is None else scorer.min
    high = math.inf if scorer.max is None else scorer.max
    passed = low <= number <= high
    where = "within" if passed else "outside"
    bounds = f"[{_bound(scorer.min, '-inf')}, {_bound(scorer.max, 'inf')}]"
    return score_of(scorer, passed, f"{number:g} is {where} {bounds}", grade=number)


def _bound(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:g}"


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _function(
    scorer: FunctionScorer, outcome: CaseOutcome, functions: FunctionRegistry | None
) -> Score:
    from dagwright.workers.signatures import accepts, run_to_completion

    registered = functions.get(scorer.function) if functions is not None else None
    if registered is None:
        return failed_score(scorer, f"no registered function {scorer.function!r} (--import?)")
    kwargs: dict[str, Any] = {"output": graded_value(scorer, outcome), **scorer.params}
    if accepts(registered.func, "case"):
        kwargs["case"] = outcome.run_input
    try:
        returned = run_to_completion(registered.func(**kwargs))
    except Exception as exc:  # the user's code: its failure is this score's, not the eval's
        return failed_score(scorer, f"{scorer.function} raised {type(exc).__name__}: {exc}")
    return _function_score(scorer, returned)


def _function_score(scorer: FunctionScorer, returned: Any) -> Score:
    """A function's return as a score: a bool, a number in [0, 1], or a mapping."""
    reason = ""
    if isinstance(returned, dict):
        reason = " ".join(str(returned.get("reason", "")).split())[:300]
        passed_given = returned.get("passed")
        returned = returned.get("score", passed_given)
    else:
        passed_given = None
    if isinstance(returned, bool):
        value = 1.0 if returned else 0.0
    elif isinstance(returned, int | float) and 0.0 <= returned <= 1.0:
        value = float(returned)
    else:
        return failed_score(scorer, f"{scorer.function} returned {shown(returned)}, not a score")
    passed = bool(passed_given) if isinstance(passed_given, bool) else value >= scorer.pass_at
    return score_of(scorer, passed, reason or f"{scorer.function}: {value:g}", value=value)


def _tool_called(scorer: ToolCalled, outcome: CaseOutcome) -> Score:
    ran = outcome.tool_calls.ran[scorer.tool]
    asked = outcome.tool_calls.asked[scorer.tool]
    passed = ran >= scorer.min_times
    refused = f", {asked - ran} refused" if asked > ran else ""
    return score_of(scorer, passed, f"{scorer.tool} ran {ran} time(s){refused}")


def _tool_not_called(scorer: ToolNotCalled, outcome: CaseOutcome) -> Score:
    asked = outcome.tool_calls.asked[scorer.tool]
    refused = asked - outcome.tool_calls.ran[scorer.tool]
    detail = f" ({refused} refused)" if refused else ""
    return score_of(scorer, asked == 0, f"{scorer.tool} asked for {asked} time(s){detail}")


def _node_type_ran(scorer: NodeTypeRan, outcome: CaseOutcome) -> Score:
    count = outcome.node_types_ran()[scorer.type]
    passed = count == 0 if isinstance(scorer, NodeTypeNotRan) else count > 0
    return score_of(scorer, passed, f"{count} {scorer.type} node(s) ran")


def _max_cost(scorer: MaxCost, outcome: CaseOutcome) -> Score:
    cost = outcome.cost_usd
    if cost is None:
        return score_of(scorer, False, "the cost is unknown (a model of the run is unpriced)")
    passed = cost <= scorer.usd
    return score_of(scorer, passed, f"${cost:.4f} of at most ${scorer.usd:g}", grade=cost)


def _max_duration(scorer: MaxDuration, outcome: CaseOutcome) -> Score:
    took = outcome.duration_s
    if took is None:
        return score_of(scorer, False, "the run has not ended")
    passed = took <= scorer.seconds
    return score_of(scorer, passed, f"{took:.1f} s of at most {scorer.seconds:g} s", grade=took)


def _max_tokens(scorer: MaxTokens, outcome: CaseOutcome) -> Score:
    used = outcome.tokens
    passed = used <= scorer.tokens
    return score_of(scorer, passed, f"{used} tokens of at most {scorer.tokens}", grade=used)


def _no_dead_letters(scorer: NoDeadLetters, outcome: CaseOutcome) -> Score:
    count = outcome.dead_letters
    return score_of(scorer, count == 0, f"{count} dead letter(s)")


def _succeeded(scorer: Succeeded, outcome: CaseOutcome) -> Score:
    if outcome.succeeded:
        return score_of(scorer, True, "the run succeeded")
    return score_of(scorer, False, outcome.failure())


GRADERS: dict[type[ScorerOptions], Callable[[Any, CaseOutcome], Score]] = {
    Equals: _equals,
    Contains: _contains,
    NotContains: _contains,
    Regex: _regex,
    JsonSchemaScorer: _json_schema,
    NumberRange: _number,
    ToolCalled: _tool_called,
    ToolNotCalled: _tool_not_called,
    NodeTypeRan: _node_type_ran,
    NodeTypeNotRan: _node_type_ran,
    MaxCost: _max_cost,
    MaxDuration: _max_duration,
    MaxTokens: _max_tokens,
    NoDeadLetters: _no_dead_letters,
    Succeeded: _succeeded,
}
