"""The LLM judge: a model grades an output against a suite author's rubric, on a scale.

The verdict is recorded through a tool, ``record_verdict`` (a whole-number grade within
the scale and a reason), which the request forces (``tool_choice``) where the model takes
forced tool use; ``llm/wire.py`` sends ``auto`` to the models that refuse it, and the
prompt asks for the tool either way. An answer that is not one usable call (no call, a
grade off the scale, no reason) is told back to the model once (an answer cut at
``max_tokens`` is asked again with twice the room); a second unusable answer makes a
verdict without a grade, which scores None and fails.

The request goes through the ``LLM`` every agent uses (``dagwright.llm.build_llm``): the
same breakers, rate limits, wire rules, end-of-life guard and accounting. The rubric,
the scale, the case's input and the reference answer are the suite author's (trusted)
and are written as they are; the output was written by a model and goes inside a
``DataFence`` block (``workers/untrusted.py``), which the system prompt
(``prompts/judge.md``) says is data to grade, never instructions.

A usable verdict is cached in Redis (``keys.judge_verdict``) by the sha256 of what
decides it: rubric, scale, reference answer, whether the input is shown (and the input
if so), the output, the judge model and the judge prompt. Re-grading an unchanged output
asks no model and costs 0 tokens. Two identical judgings at once may both pay; the first
to finish stores its verdict (``SET NX``), and neither overwrites the other. An unusable
verdict is not cached: the next eval asks again.

Rejected: parsing a grade out of free text (a model that writes "4/5, or 3 at a pinch"
gets whichever number a regex likes); caching by the request's digest (the fence's
random token differs on every judging, so nothing would ever hit).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from dagwright.evals.results import Score
from dagwright.llm.messages_api_rules import max_output_tokens
from dagwright.llm.protocol import LLMRequest, LLMResponse
from dagwright.models import Usage
from dagwright.workers.agent_state import sendable
from dagwright.workers.untrusted import DataFence

if TYPE_CHECKING:
    import redis

    from dagwright.evals.suite import Judge
    from dagwright.keys import Keys
    from dagwright.llm.protocol import LLM

logger = logging.getLogger(__name__)

VERDICT_TOOL = "record_verdict"
MAX_REASON_CHARS = 1000
MAX_JUDGED_OUTPUT_CHARS = 60_000  # about 15k tokens: the rest is cut, and the judge told so
MAX_CACHED_VERDICT_CHARS = 16_384  # a stored verdict is a grade and a reason
DEFAULT_JUDGE_MAX_TOKENS = 2048  # the call, with room for a model that thinks by default
UNUSABLE = "the judge gave no usable verdict: "


class JudgeVerdict(BaseModel):
    """What the judge decided about one output, and what asking it cost."""

    model_config = ConfigDict(frozen=True)

    grade: int | None
    """The grade on the judge's scale; None: the judge gave no usable verdict."""
    reason: str
    """The judge's reason; for an unusable verdict, what was wrong with its answers."""
    model: str
    """The judge's model (as requested: the cache's key holds it)."""
    cached: bool = False
    """Read from the verdict cache: no request was made, ``usage`` is zero."""
    usage: Usage = Usage()
    """Tokens and cost of the judge's calls (both, when its first answer was unusable)."""


class _StoredVerdict(BaseModel):
    """A verdict as the cache keeps it."""

    model_config = ConfigDict(extra="forbid")

    grade: int
    reason: str


def judge_output(
    judge: Judge,
    *,
    case_input: dict[str, Any],
    output: Any,
    llm: LLM,
    redis_client: redis.Redis,
    keys: Keys,
    default_model: str,
    ttl_s: int,
    max_tokens: int = DEFAULT_JUDGE_MAX_TOKENS,
) -> JudgeVerdict:
    """The judge's verdict on ``output`` (text, or JSON data) of a case run with
    ``case_input`` (``EvalCase.run_input``): from the verdict cache, else from
    ``judge.model`` (else ``default_model``) through ``llm``. LLM errors
    (``LLMRequestError``, ``LLMUnavailableError``...) propagate as raised."""
    model = judge.model or default_model
    key = keys.judge_verdict(verdict_digest(judge, case_input, output, model))
    cached = cached_verdict(redis_client, key, judge, model)
    if cached is not None:
        return cached
    verdict = ask_judge(judge, case_input, output, llm, model, max_tokens)
    if verdict.grade is not None:
        stored = _StoredVerdict(grade=verdict.grade, reason=verdict.reason)
        redis_client.set(key, stored.model_dump_json(), nx=True, ex=ttl_s)
    return verdict


def judge_score(judge: Judge, verdict: JudgeVerdict) -> Score:
    """The verdict as a score: the grade scaled to [0, 1], passed from ``pass_score``."""
    low, high = judge.scale
    usage = verdict.usage
    common = {
        "scorer": judge.label(),
        "kind": judge.kind,
        "cached": verdict.cached,
        "tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
    }
    if verdict.grade is None:
        return Score(value=None, passed=False, reason=UNUSABLE + verdict.reason, **common)
    return Score(
        value=(verdict.grade - low) / (high - low),
        passed=verdict.grade >= judge.passing_grade,
        reason=verdict.reason,
        grade=float(verdict.grade),
        **common,
    )


# --- The cache ---------------------------------------------------------------------------


def verdict_digest(judge: Judge, case_input: dict[str, Any], output: Any, model: str) -> str:
    """sha256 of what decides a verdict, as canonical JSON (``pass_score`` is left out:
    it reads the grade, it does not change it)."""
    decided_by: dict[str, Any] = {
        "rubric": judge.rubric,
        "scale": list(judge.scale),
        "expected": judge.expected,
        "include_input": judge.include_input,
        "output": output,
        "model": model,
        "prompt": prompt_digest(),
    }
    if judge.include_input:
        decided_by["input"] = case_input
    canonical = json.dumps(
        decided_by, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def cached_verdict(
    redis_client: redis.Redis, key: str, judge: Judge, model: str
) -> JudgeVerdict | None:
    """The cached verdict under ``key``; None if there is none, or none usable (too large,
    not a verdict, a grade off the scale): then the judge is asked again."""
    raw = redis_client.get(key)
    if raw is None:
        return None
    if len(raw) > MAX_CACHED_VERDICT_CHARS:
        logger.warning("ignoring a cached judge verdict of %d characters at %s", len(raw), key)
        return None
    try:
        stored = _StoredVerdict.model_validate_json(raw)
    except ValidationError:
        logger.warning("ignoring a cached judge verdict that is not one at %s", key)
        return None
    low, high = judge.scale
    if not low <= stored.grade <= high:
        return None
    return JudgeVerdict(grade=stored.grade, reason=stored.reason, model=model, cached=True)


# --- Asking the judge --------------------------------------------------------------------


def ask_judge(
    judge: Judge,
    case_input: dict[str, Any],
    output: Any,
    llm: LLM,
    model: str,
    max_tokens: int,
) -> JudgeVerdict:
    """One request; once more, with the problem told, if its answer is unusable."""
    request = judge_request(judge, case_input, output, model, max_tokens)
    response = llm.complete(request)
    found = verdict_in(response, judge)
    usage = response.usage
    if isinstance(found, str):
        response = llm.complete(retry_request(request, response, found, judge))
        usage = usage.plus(response.usage)
        found = verdict_in(response, judge)
    if isinstance(found, str):
        return JudgeVerdict(grade=None, reason=found, model=model, usage=usage)
    grade, reason = found
    return JudgeVerdict(grade=grade, reason=reason, model=model, usage=usage)


def judge_request(
    judge: Judge, case_input: dict[str, Any], output: Any, model: str, max_tokens: int
) -> LLMRequest:
    """The judge's first request: the prompt, the verdict tool, forced."""
    fence = DataFence.random()
    text = grading_text(judge, case_input, output, fence)
    return LLMRequest(
        model=model,
        system=judge_prompt(),
        messages=[{"role": "user", "content": text}],
        tools=[verdict_tool(judge)],
        tool_choice={"type": "tool", "name": VERDICT_TOOL, "disable_parallel_tool_use": True},
        max_tokens=max_tokens,
        temperature=0.0,  # sent only to models that take it (llm/wire.py)
    )


def verdict_tool(judge: Judge) -> dict[str, Any]:
    """The ``record_verdict`` tool, its grade bounded by the scale."""
    low, high = judge.scale
    return {
        "name": VERDICT_TOOL,
        "description": (
            f"Record your verdict on the output: a whole-number grade from {low} (worst) "
            f"to {high} (best), and the reason for it."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "grade": {"type": "integer", "minimum": low, "maximum": high},
                "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
            },
            "required": ["grade", "reason"],
            "additionalProperties": False,
        },
    }


def grading_text(judge: Judge, case_input: dict[str, Any], output: Any, fence: DataFence) -> str:
    """The user message: the author's rubric, scale, input and reference answer as they
    are, then the output inside the fence."""
    low, high = judge.scale
    parts = [
        f"## Rubric\n\n{judge.rubric}",
        f"## Scale\n\nA whole number from {low} (worst) to {high} (best); "
        f"{judge.passing_grade} or more passes.",
    ]
    if judge.include_input:
        shown = json.dumps(case_input, indent=2, sort_keys=True, ensure_ascii=False, default=str)
        parts.append(f"## The input the system was given\n\n```json\n{shown}\n```")
    if judge.expected is not None:
        parts.append(f"## A reference answer\n\n{judge.expected}")
    text, cut = judged_text(output)
    note = f"\n\n(The output was cut: {cut} more characters are not shown.)" if cut else ""
    parts.append(f"## The output to grade\n\n{fence.block(text, source='output')}{note}")
    parts.append(f"Call `{VERDICT_TOOL}` once with your grade and your reason.")
    return "\n\n".join(parts)


def judged_text(output: Any) -> tuple[str, int]:
    """The output as the judge reads it (JSON data indented), and how many characters
    past MAX_JUDGED_OUTPUT_CHARS were cut."""
    if isinstance(output, str):
        text = output
    else:
        text = json.dumps(output, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    cut = max(0, len(text) - MAX_JUDGED_OUTPUT_CHARS)
    return text[:MAX_JUDGED_OUTPUT_CHARS], cut


def verdict_in(response: LLMResponse, judge: Judge) -> tuple[int, str] | str:
    """The (grade, reason) of the response's one ``record_verdict`` call; else what is
    wrong with the answer, in a line."""
    if response.stop_reason == "max_tokens":
        return "the answer was cut at max_tokens before its verdict was complete"
    if response.stop_reason == "refusal":
        return "the model declined to answer (stop_reason refusal)"
    calls = [block for block in response.tool_uses() if block.get("name") == VERDICT_TOOL]
    if len(calls) != 1:
        said = " ".join(response.text().split())[:80]
        found = f"{len(calls)} calls" if calls else f"text ({said!r})" if said else "nothing"
        return f"it answered with {found} instead of one call of {VERDICT_TOOL}"
    arguments = calls[0].get("input")
    arguments = arguments if isinstance(arguments, dict) else {}
    grade, reason = arguments.get("grade"), arguments.get("reason")
    low, high = judge.scale
    if isinstance(grade, float) and grade.is_integer():
        grade = int(grade)
    if not isinstance(grade, int) or isinstance(grade, bool):
        return f"grade {str(grade)[:40]!r} is not a whole number"
    if not low <= grade <= high:
        return f"grade {grade} is outside the scale {low}..{high}"
    if not isinstance(reason, str) or not reason.strip():
        return "it gave no reason"
    return grade, reason.strip()[:MAX_REASON_CHARS]


def retry_request(
    request: LLMRequest, response: LLMResponse, problem: str, judge: Judge
) -> LLMRequest:
    """The request once more: with twice the room after an answer cut at ``max_tokens``
    (the cut call is not kept: its input is half-written), else with the problem told."""
    if response.stop_reason == "max_tokens":
        room = min(2 * request.max_tokens, max_output_tokens(request.model))
        return request.model_copy(update={"max_tokens": room})
    messages = told_the_problem(request.messages, response, problem, judge)
    return request.model_copy(update={"messages": messages})


def told_the_problem(
    messages: list[dict[str, Any]], response: LLMResponse, problem: str, judge: Judge
) -> list[dict[str, Any]]:
    """The conversation with the unusable answer and the problem told: each of its tool
    calls answered as an error (the API wants every call answered), then the request."""
    low, high = judge.scale
    ask = (
        f"That verdict is unusable: {problem}. Call `{VERDICT_TOOL}` once, with a whole-"
        f"number grade from {low} to {high} and your reason."
    )
    content = sendable(response.content)
    if not content:  # nothing to keep as a turn: the request joins the first message
        first = messages[0]
        return [{"role": "user", "content": f"{first['content']}\n\n{ask}"}]
    results: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": problem, "is_error": True}
        for block in content
        if block.get("type") == "tool_use"
    ]
    return [
        *messages,
        {"role": "assistant", "content": content},
        {"role": "user", "content": [*results, {"type": "text", "text": ask}]},
    ]


@functools.cache
def judge_prompt() -> str:
    """The judge's system prompt (``prompts/judge.md``)."""
    return (resources.files("dagwright.evals") / "prompts" / "judge.md").read_text("utf-8").strip()


@functools.cache
def prompt_digest() -> str:
    """What identifies the judge's prompt: a new wording is not answered from verdicts
    the old one gave."""
    return hashlib.sha256(judge_prompt().encode()).hexdigest()[:16]
