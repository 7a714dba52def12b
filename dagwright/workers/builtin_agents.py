"""The built-in LLM worker types: researcher, writer, analyst, coder, reviewer.

Each is an AgentSpec: a system prompt from ``prompts/<name>.md`` (plus the rules in
``prompts/_common.md``), a tool set, a deny-by-default policy allowing those tools, and
limits. Users declare their own: an ``AgentSpec`` bound to a module-level name.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, Field

from dagwright.models import Node, RetryPolicy
from dagwright.settings import Settings
from dagwright.workers.agent_loop import AgentSpec, run_agent
from dagwright.workers.agent_tools import capability_lines, offered_tools
from dagwright.workers.context import NodeContext
from dagwright.workers.node_control import node_control_problems
from dagwright.workers.registry import WorkerType
from dagwright.workers.tools.base import ToolRegistry
from dagwright.workers.tools.policy import ToolPolicy

WORKSPACE_TOOLS = ("workspace_read", "workspace_write", "workspace_list")
# Each offered only where the settings let it reach something (``agent_tools``).
WEB_TOOLS = ("web_search", "web_fetch", "http_get")
AGENT_RETRY = RetryPolicy(max_attempts=3, backoff_s=5, backoff_max_s=120)
# max_tokens and effort of each type. On the models that think by default (adaptive
# thinking, Sonnet 5 and later) max_tokens holds the thinking and the answer together:
# room for both, where 4,096 had a tool call cut mid-way. Effort (sent only to models that
# take it) is the docs' control of how much a turn thinks: medium where the work is
# gathering and writing, high where it is reasoning over data or code.
THINKING_ROOM: dict[str, dict[str, Any]] = {
    "researcher": {"max_tokens": 16_000, "effort": "medium"},
    "writer": {"max_tokens": 16_000, "effort": "medium"},
    "analyst": {"max_tokens": 24_000, "effort": "high"},
    "coder": {"max_tokens": 32_000, "effort": "high"},
    "reviewer": {"max_tokens": 12_000, "effort": "medium"},
}


@cache
def prompt(name: str) -> str:
    """The system prompt of a built-in type, with the rules common to every agent."""
    folder = resources.files("dagwright.workers") / "prompts"
    return (folder / f"{name}.md").read_text() + (folder / "_common.md").read_text()


class ReviewResult(BaseModel):
    """The reviewer's verdict."""

    approved: bool = Field(description="True if the work can be used as it stands.")
    summary: str = Field(description="The verdict in one or two sentences.")
    issues: list[str] = Field(default_factory=list, description="Concrete, actionable issues.")


def builtin_agents() -> list[AgentSpec]:
    def spec(name: str, description: str, tools: tuple[str, ...], **kwargs: Any) -> AgentSpec:
        return AgentSpec(
            name=name,
            description=description,
            system_prompt=prompt(name),
            tools=tools,
            policy=ToolPolicy.allowing(*tools),
            **kwargs,
        )

    return [
        spec(
            "researcher",
            "Gathers and checks facts, with sources, from its inputs and whatever web "
            "access its tools give it here.",
            ("read_input", *WEB_TOOLS, *WORKSPACE_TOOLS),
            **THINKING_ROOM["researcher"],
        ),
        spec(
            "writer",
            "Writes clear prose from the material in its inputs; in a scheduled run it may "
            "propose follow-up goals.",
            ("read_input", *WORKSPACE_TOOLS, "propose_followup"),
            **THINKING_ROOM["writer"],
        ),
        spec(
            "analyst",
            "Analyses data and evidence and draws careful conclusions.",
            ("read_input", *WORKSPACE_TOOLS),
            **THINKING_ROOM["analyst"],
        ),
        spec(
            "coder",
            "Writes, runs (in the sandbox) and fixes code, keeping files in the workspace.",
            ("read_input", *WORKSPACE_TOOLS, "run_python"),
            **THINKING_ROOM["coder"],
        ),
        spec(
            "reviewer",
            "Checks work against its instruction; returns approved, summary and issues.",
            ("read_input", "workspace_read", "workspace_list"),
            output_model=ReviewResult,
            **THINKING_ROOM["reviewer"],
        ),
    ]


def agent_worker_type(spec: AgentSpec, tools: ToolRegistry) -> WorkerType:
    """A worker type running ``spec``'s agent loop."""

    def run(ctx: NodeContext, node: Node) -> Any:
        return run_agent(ctx, node, with_sandbox_note(spec, tools, ctx.settings), tools)

    def check_node(node: Node) -> list[str]:
        problems = node_control_problems(node, spec)
        if not node.instruction:
            problems.insert(0, f"a {spec.name} node needs `instruction:` saying what to do")
        return problems

    return WorkerType(
        name=spec.name,
        kind="agent",
        description=spec.description,
        run=run,
        check_node=check_node,
        default_retry=AGENT_RETRY,
        tools=spec.tools,
        model=spec.model,
        capabilities=lambda settings: agent_capabilities(spec, tools, settings),
        skills=tuple(skill.name for skill in spec.attached_skills),
    )


def with_sandbox_note(spec: AgentSpec, tools: ToolRegistry, settings: Settings) -> AgentSpec:
    """``spec`` whose prompt says what the sandbox has installed, when it offers
    ``run_python`` here (the same sentence as the tool's description)."""
    offered = offered_tools(spec.tools, tools, settings)
    tool = tools.get("run_python")
    if tool is None or tool.settings_note is None or "run_python" not in {t.name for t in offered}:
        return spec
    note = tool.settings_note(settings)
    return replace(spec, system_prompt=f"{spec.system_prompt}\n\n## The sandbox\n\n{note}\n")


def agent_capabilities(spec: AgentSpec, tools: ToolRegistry, settings: Settings) -> list[str]:
    """The tools ``spec`` is offered under ``settings``, one line each (the final answer
    tool aside); a type offered none says so, so the planner gives it no web work."""
    lines = capability_lines(offered_tools(spec.tools, tools, settings), settings)
    lines += [f"skill {s.name}: {s.manifest.description}" for s in spec.attached_skills]
    return lines or ["(no tools here: it works from its instruction and inputs alone)"]
