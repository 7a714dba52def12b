"""``AgentSpec``: an LLM worker type, as data (its prompt, tools, policy, model, limits and
how its requests are made)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from dagwright.llm.protocol import Effort
from dagwright.skills.folder import Skill
from dagwright.workers.tools.policy import ToolPolicy

FINAL_ANSWER_TOOL = "final_answer"


@dataclass(frozen=True)
class AgentSpec:
    """An LLM worker type: its prompt, tools, policy, model and limits."""

    name: str
    description: str
    system_prompt: str
    tools: tuple[str, ...] = ()
    policy: ToolPolicy = field(default_factory=ToolPolicy)
    model: str | None = None  # None: settings.llm.default_model
    max_turns: int = 12
    max_tokens: int = 16_000
    """``max_tokens`` of each call: thinking and answer together on the models that think
    by default (Sonnet 5 and later), so sized for both. A text answer cut there is
    continued; a cut tool call is made once more with twice as many, up to
    ``llm_max_tokens_cap``, then fails."""
    token_budget: int = 400_000
    max_tool_errors: int = 3
    output_model: type[BaseModel] | None = None
    final_tool: str = FINAL_ANSWER_TOOL
    """Name of the tool the structured answer is given through (with ``output_model``)."""
    check_output: Callable[[Any], list[str]] | None = None
    """Problems of a structurally valid answer (e.g. a plan with a cycle); each goes back
    to the model, which may correct it, as a failed call of ``final_tool``."""
    temperature: float | None = None
    """Sent only to models that still take it (``dagwright.llm.messages_api_rules``)."""
    thinking: dict[str, Any] | None = None
    """The Messages API's ``thinking`` object, e.g. ``{"type": "adaptive"}`` or
    ``{"type": "enabled", "budget_tokens": 4096}`` (below ``max_tokens``); None: not sent."""
    effort: Effort | None = None
    """``output_config.effort`` (``low`` ... ``max``), sent to the models that take it
    (``llm/effort.py``); None: the model's default (``high`` on most)."""
    fallback_model: str | None = None
    """Model a turn is retried with when the model refuses; None:
    ``llm_refusal_fallback_model``."""
    mcp_servers: tuple[str, ...] = ()
    """Names of ``mcp_servers`` (settings) whose tools this type is offered, as
    ``mcp__<server>__<tool>``; ``policy`` (or ``agent_mcp`` rules) must allow them."""
    skills: tuple[str, ...] = ()
    """Names of skills (folders of ``skill_dirs``) this type is given, besides those
    ``agent_skills`` (settings) attaches: its system prompt lists them, the skill tools
    load them (docs/skills.md)."""
    attached_skills: tuple[Skill, ...] = ()
    """The skills themselves, as the registry read them (set when the registry is built,
    ``workers/skills_attach.py``; not for users to set)."""
    response_cache: bool = False
    """Answer an identical request from the response cache in Redis instead of calling the
    model (for repeatable work: evaluations, re-runs); ``llm_cache_enabled`` turns it on
    for every type."""
