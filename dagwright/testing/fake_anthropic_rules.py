"""What the fake Anthropic API refuses before it plays anything, worded as the real API.

The fake is meant to be at least as strict as the real Messages API (STYLE.md §16): a
request our client builds wrongly must fail offline, not first in production. The model
facts (which models refuse sampling parameters, budget thinking, how long tool names may
be) live in :mod:`dagwright.llm.messages_api_rules`, which the client can read too; the
rules on turns and tool results live in :mod:`dagwright.testing.fake_anthropic_conversation`.

A rule returns a :class:`Rejection` or None; :func:`request_rejection` runs them in the
order the real API seems to: the body's shape, the model, then the parameters, the tools,
the conversation and the cache breakpoints.

The rules judge requests, not the script: a scripted reply is played as written, even one
the real API would not send (text to a request whose ``tool_choice`` forces a tool). The
script is the test's word, and the client must handle such answers anyway: where the
model refuses forced tool use, ``llm/wire.py`` sends ``auto`` and any answer may come.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from dagwright.llm import messages_api_rules as api
from dagwright.llm.model_lifecycle import retired_problem, utc_today
from dagwright.testing.fake_anthropic_conversation import (
    conversation_problem,
    thinking_turn_problem,
)
from dagwright.testing.fake_anthropic_memory import MEMORY_TOOL_TYPE, memory_tool_problem
from dagwright.testing.fake_anthropic_server_tools import (
    server_tool_problem,
    unanswered_server_call,
    untitled_citation,
)
from dagwright.testing.fake_anthropic_tokens import prompt_blocks

THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
BUDGET_THINKING_GONE = (
    "thinking.type.enabled is not supported for this model. Use thinking.type.adaptive and "
    "output_config.effort to control thinking behavior."
)
# The wording reported from the live API for Opus 5.5; on Sonnet 5.5 the guide says the
# message points to between_tools (its exact wording is not published).
THINKING_ALWAYS_ON = (
    '"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)
THINKING_OFF_IS_BETWEEN_TOOLS = (
    '"thinking.type.disabled" is not supported for this model. Use '
    '"thinking.type.between_tools" to turn off up-front thinking, or "thinking.type.adaptive" '
    'and "output_config.effort" to control thinking behavior.'
)
BETWEEN_TOOLS_EFFORT = (
    '"thinking.type.between_tools" is not supported with output_config.effort {effort!r}. '
    'Use "thinking.type.adaptive" to run at xhigh or max effort.'
)
PREFILL_REFUSED = "Prefilling assistant messages is not supported for this model."
FORCED_TOOL_CHOICE_REFUSED = (
    "Forced tool use is not supported for this model: tool_choice.type may be 'auto' or 'none'."
)
# Each type of tool_choice and the fields it takes (the SDK's ToolChoice*Param; any other
# field is a 400, as everywhere in the API's request models).
TOOL_CHOICE_FIELDS = {
    "auto": frozenset({"type", "disable_parallel_tool_use"}),
    "any": frozenset({"type", "disable_parallel_tool_use"}),
    "tool": frozenset({"type", "name", "disable_parallel_tool_use"}),
    "none": frozenset({"type"}),
}
FORCING_TOOL_CHOICES = frozenset({"any", "tool"})
FORCED_WITHOUT_TOOLS = "tool_choice: forced tool use requires `tools`, and none were given."
FORCED_TOOL_NOT_OFFERED = "tool_choice.tool.name: Tool '{name}' not found in `tools`."


@dataclass(frozen=True)
class Rejection:
    """An error answer: its status, the API's error type, and the message."""

    message: str
    status: int = 400
    error_type: str = "invalid_request_error"


Body = Mapping[str, Any]


def request_rejection(
    body: Body,
    known_models: Collection[str],
    *,
    counting_tokens: bool = False,
    today: dt.date | None = None,
) -> Rejection | None:
    """Why the real API would refuse ``body``; None if it would take it.

    ``counting_tokens`` checks it as ``/v1/messages/count_tokens`` does: ``max_tokens``
    is neither needed nor looked at. A model past its end of life on ``today`` (None:
    the UTC date) is no model, as on the real API.
    """
    shape = _shape_problem(body, counting_tokens)
    if shape is not None:
        return Rejection(shape)
    if body["model"] not in known_models or _retired(body["model"], today):
        return Rejection(f"model: {body['model']}", 404, "not_found_error")
    rules = _PARAMETER_RULES[1:] if counting_tokens else _PARAMETER_RULES
    for rule in (*rules, _tools_problem, _conversation, _cache_problem):
        problem = rule(body)
        if problem is not None:
            return Rejection(problem)
    return None


def _retired(model: str, today: dt.date | None) -> bool:
    return retired_problem(model, today or utc_today()) is not None


def _shape_problem(body: Body, counting_tokens: bool) -> str | None:
    required: dict[str, type] = {"model": str, "messages": list}
    if not counting_tokens:
        required["max_tokens"] = int
    for name, expected in required.items():
        if name not in body:
            return f"{name}: Field required"
        if not isinstance(body[name], expected) or isinstance(body[name], bool):
            return f"{name}: Input should be a valid {_type_word(expected)}"
    return None


def _type_word(expected: type) -> str:
    return {int: "integer", str: "string", list: "list"}.get(expected, expected.__name__)


def _max_tokens_problem(body: Body) -> str | None:
    max_tokens, model = body["max_tokens"], body["model"]
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    ceiling = api.max_output_tokens(model)
    if max_tokens > ceiling:
        return (
            f"max_tokens: {max_tokens} > {ceiling}, which is the maximum allowed number of "
            f"output tokens for {model}"
        )
    return None


def _sampling_problem(body: Body) -> str | None:
    sent = [name for name in api.SAMPLING_PARAMETERS if body.get(name) is not None]
    if sent and api.refuses_sampling(body["model"]):
        return f"`{sent[0]}` is deprecated for this model."
    if {"temperature", "top_p"} <= set(sent) and api.takes_one_sampler(body["model"]):
        return (
            "`temperature` and `top_p` cannot both be specified for this model. "
            "Please use only one."
        )
    return _sampling_range_problem(body)


def _sampling_range_problem(body: Body) -> str | None:
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            return f"{name}: Input should be a valid number"
        if not 0 <= value <= 1:
            bound = "greater than or equal to 0" if value < 0 else "less than or equal to 1"
            return f"{name}: Input should be {bound}"
    top_k = body.get("top_k")
    if top_k is not None and (not isinstance(top_k, int) or top_k < 0):
        return "top_k: Input should be greater than or equal to 0"
    return None


def _thinking_problem(body: Body) -> str | None:
    thinking = body.get("thinking")
    if thinking is None:
        return None
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    tags = _thinking_tags(body["model"])
    if kind not in tags:
        expected = ", ".join(f"'{tag}'" for tag in tags)
        return (
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    if kind == "enabled":
        problem = _budget_problem(body, thinking)
        if problem is not None:
            return problem
    return _thinking_companions_problem(body) if kind != "disabled" else None


def _budget_problem(body: Body, thinking: Mapping[str, Any]) -> str | None:
    if api.refuses_budget_thinking(body["model"]):
        return BUDGET_THINKING_GONE
    budget = thinking.get("budget_tokens")
    if budget is None:
        return "thinking.enabled.budget_tokens: Field required"
    if not isinstance(budget, int) or budget < api.MIN_THINKING_BUDGET_TOKENS:
        return (
            "thinking.enabled.budget_tokens: Input should be greater than or equal to "
            f"{api.MIN_THINKING_BUDGET_TOKENS}"
        )
    if "max_tokens" in body and budget >= body["max_tokens"]:
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            f"documentation at {THINKING_DOCS}#max-tokens-and-context-window-size"
        )
    return None


def _thinking_companions_problem(body: Body) -> str | None:
    """What thinking does not go with: sampling changes and forced tool use."""
    if body.get("temperature") not in (None, 1):
        return (
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our "
            f"documentation at {THINKING_DOCS}#feature-compatibility"
        )
    if body.get("top_k") is not None:
        return "`top_k` must be unset when thinking is enabled."
    top_p = body.get("top_p")
    if top_p is not None and top_p < 0.95:
        return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled."
    tool_choice = body.get("tool_choice")
    if isinstance(tool_choice, dict) and tool_choice.get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _tools_problem(body: Body) -> str | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    names: list[str] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{i}: Input should be a valid dictionary"
        if tool.get("type", "custom") == "custom":
            problem = _custom_tool_problem(i, tool)
        elif tool.get("type") == MEMORY_TOOL_TYPE:
            problem = memory_tool_problem(i, tool)
        else:
            problem = server_tool_problem(i, tool)
        if problem is not None:
            return problem
        names.append(str(tool.get("name")))
    if len(set(names)) != len(names):
        return "tools: Tool names must be unique."
    return None


def _custom_tool_problem(i: int, tool: Mapping[str, Any]) -> str | None:
    name = tool.get("name")
    if not isinstance(name, str) or not re.fullmatch(api.TOOL_NAME_PATTERN, name):
        return f"tools.{i}.custom.name: String should match pattern '{api.TOOL_NAME_PATTERN}'"
    schema = tool.get("input_schema")
    if not isinstance(schema, dict):
        return f"tools.{i}.custom.input_schema: Field required"
    if schema.get("type") != "object":  # the SDK's InputSchema: type is Required["object"]
        return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    return None


def _conversation(body: Body) -> str | None:
    messages = [message for message in body["messages"] if isinstance(message, dict)]
    if len(messages) != len(body["messages"]):
        return "messages: Input should be a list of message objects"
    problem = (
        conversation_problem(messages)
        or unanswered_server_call(messages)
        or untitled_citation(messages)
    )
    if problem is None and _thinking_on(body):
        problem = thinking_turn_problem(messages)
    return problem


def _thinking_on(body: Body) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _cache_problem(body: Body) -> str | None:
    ttls = [block.ttl for block in prompt_blocks(body) if block.ttl is not None]
    if len(ttls) > api.MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {api.MAX_CACHE_BREAKPOINTS} blocks with cache_control may be "
            f"provided. Found {len(ttls)}."
        )
    unknown = [ttl for ttl in ttls if ttl not in api.CACHE_TTLS_S]
    if unknown:
        return f"cache_control.ttl: Input should be '5m' or '1h' (got {unknown[0]!r})"
    if "1h" in ttls and "5m" in ttls[: ttls.index("1h")]:
        return (
            "cache_control: a ttl='1h' cache_control block must not come after a ttl='5m' "
            "cache_control block (longer TTLs must come first)"
        )
    return None


def _thinking_tags(model: str) -> tuple[str, ...]:
    tags = ("enabled", "disabled", "adaptive")
    return (*tags, "between_tools") if api.takes_between_tools(model) else tags


# --- The per-model refusals of the migration guides (messages_api_rules' second table) ---


def _model_thinking_problem(body: Body) -> str | None:
    """Thinking turned off where the model always thinks; between_tools at high effort."""
    thinking, model = body.get("thinking"), body["model"]
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "disabled" and api.refuses_thinking_disabled(model):
        return (
            THINKING_OFF_IS_BETWEEN_TOOLS
            if api.takes_between_tools(model)
            else (THINKING_ALWAYS_ON)
        )
    effort = _effort(body)
    if kind == "between_tools" and effort in api.BETWEEN_TOOLS_REFUSED_EFFORTS:
        return BETWEEN_TOOLS_EFFORT.format(effort=effort)
    return None


def _effort(body: Body) -> object:
    output_config = body.get("output_config")
    return output_config.get("effort") if isinstance(output_config, dict) else None


def _tool_choice_problem(body: Body) -> str | None:
    """A ``tool_choice`` of no known type or of a wrong shape, forcing tool use where the
    model refuses it, or forcing a tool the request does not offer."""
    tool_choice = body.get("tool_choice")
    if tool_choice is None:
        return None
    if not isinstance(tool_choice, dict):
        return "tool_choice: Input should be a valid dictionary or object to extract fields from"
    kind = tool_choice.get("type")
    if kind not in TOOL_CHOICE_FIELDS:
        return (
            f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'auto', 'any', 'tool', 'none'"
        )
    problem = _tool_choice_shape_problem(kind, tool_choice)
    if problem is None and kind in FORCING_TOOL_CHOICES:
        if api.refuses_forced_tool_choice(body["model"]):
            return FORCED_TOOL_CHOICE_REFUSED
        problem = _forced_tool_problem(tool_choice, body.get("tools"))
    return problem


def _tool_choice_shape_problem(kind: str, tool_choice: Mapping[str, Any]) -> str | None:
    """Fields of another type of tool_choice, a tool's name missing, a flag not a bool."""
    extra = sorted(set(tool_choice) - TOOL_CHOICE_FIELDS[kind])
    if extra:
        return f"tool_choice.{kind}.{extra[0]}: Extra inputs are not permitted"
    if kind == "tool" and "name" not in tool_choice:
        return "tool_choice.tool.name: Field required"
    if kind == "tool" and not isinstance(tool_choice["name"], str):
        return "tool_choice.tool.name: Input should be a valid string"
    flag = tool_choice.get("disable_parallel_tool_use", False)
    if not isinstance(flag, bool):
        return f"tool_choice.{kind}.disable_parallel_tool_use: Input should be a valid boolean"
    return None


def _forced_tool_problem(tool_choice: Mapping[str, Any], tools: object) -> str | None:
    """Forcing tool use with no tools, or forcing a tool the request does not offer (the
    model could not comply). The API's wording of these two is not published: the status
    and error type are those of every invalid request."""
    listed = tools if isinstance(tools, list) else []
    offered = [tool.get("name") for tool in listed if isinstance(tool, dict)]
    if not offered:
        return FORCED_WITHOUT_TOOLS
    name = tool_choice.get("name")
    if tool_choice["type"] == "tool" and name not in offered:
        return FORCED_TOOL_NOT_OFFERED.format(name=name)
    return None


def _prefill_problem(body: Body) -> str | None:
    """A conversation ending with an assistant turn, where the model takes no prefill. A
    turn the API paused (``pause_turn``, in the middle of its server tools) is sent back as
    it came for the model to go on: the documented continuation, not a prefill."""
    messages = body["messages"]
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and not _paused(last):
        return PREFILL_REFUSED if api.refuses_prefill(body["model"]) else None
    return None


def _paused(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "server_tool_use" for block in content
    )


_PARAMETER_RULES: tuple[Callable[[Body], str | None], ...] = (
    _max_tokens_problem,  # first: count_tokens skips it
    _sampling_problem,
    _model_thinking_problem,
    _thinking_problem,
    _tool_choice_problem,
    _prefill_problem,
)
