"""A node's skills: which of its type's it is given, the catalog its system prompt
carries, the tools that act on them, and the versions its checkpoint pins.

The catalog (each skill's name and description, nothing more) goes at the end of the
type's system prompt: the block that is the same for every node of the type in every run
(``llm/prompt_caching.py``, breakpoint 1), so the catalog is cached with the prompt. A
node that narrows its skills (``Node.skills``) has a catalog, and so a cached prefix, of
its own. The bodies come only through ``load_skill`` (progressive disclosure).

Versions (decision 92): the first attempt of a node records each skill's content hash in
its checkpoint (``AgentState.skills``) and as a ``skill.attached`` event of its trace. A
resumed node (a redelivery, a replay that keeps the checkpoint) whose skill is no longer
that version is refused with one line (SkillChangedError): its conversation was built on
the old text, and a skill's instructions changing in the middle of one is how a replay
silently does something else. ``dagwright dlq replay ID --fresh`` runs it anew with the
new version. Rejected: running on with the new version and showing the change (the
model's earlier turns followed the old instructions; the old bytes are gone from the
worker, so the replay could not be made the same either).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dagwright.errors import SkillChangedError
from dagwright.models import Node
from dagwright.settings import SKILL_TOOLS
from dagwright.skills.folder import Skill, short_hash
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.context import NodeContext
from dagwright.workers.tools.base import ToolRegistry
from dagwright.workers.tools.skills import node_skill_tools

SKILL_ATTACHED = "skill.attached"  # zero-length span: one per skill a node attempt is given
CATALOG_HEADING = "## Skills"
CATALOG_RULE = (
    "Skills are folders of instructions, scripts and resources for particular kinds of "
    "task. Only their names and descriptions are listed here. When your task matches a "
    "skill's description, call load_skill with its name and follow its instructions; read "
    "its other files with read_skill_file and run its scripts (in the sandbox) with "
    "run_skill_script, as they say."
)


def equip_skills(
    ctx: NodeContext, node: Node, spec: AgentSpec, tools: ToolRegistry
) -> tuple[AgentSpec, ToolRegistry, dict[str, str]]:
    """``spec`` with the node's skills' catalog in its prompt, ``tools`` with the skill
    tools over them, and their versions (name -> hash); SkillChangedError if a resumed
    node's skill is not the version it started with. A type with no skill is unchanged."""
    if not spec.attached_skills:
        return spec, tools, {}
    skills = node_skills(node, spec)
    versions = {skill.name: skill.content_hash for skill in skills}
    pinned = pinned_versions(ctx.last_checkpoint)
    check_unchanged(node, pinned, versions)
    for skill in skills:
        ctx.instant(
            SKILL_ATTACHED,
            skill=skill.name,
            skill_hash=skill.content_hash,
            resumed=pinned is not None,
        )
    if not skills or not loads_skills(node, spec):
        return replace(spec, tools=without_skill_tools(spec.tools)), tools, versions
    prompt = f"{spec.system_prompt.rstrip()}\n\n{skills_catalog(skills)}\n"
    equipped = replace(spec, system_prompt=prompt)
    return equipped, node_skill_tools(tools, {s.name: s for s in skills}), versions


def node_skills(node: Node, spec: AgentSpec) -> list[Skill]:
    """The type's skills, or those of them the node keeps (``skills:``; the plan's
    validation refused any other)."""
    if node.skills is None:
        return list(spec.attached_skills)
    return [skill for skill in spec.attached_skills if skill.name in node.skills]


def skills_catalog(skills: Sequence[Skill]) -> str:
    """The system prompt's list of skills: names and descriptions only."""
    entries = [
        f"<skill>\n<name>{skill.name}</name>\n<description>{skill.manifest.description}"
        "</description>\n</skill>"
        for skill in skills
    ]
    return "\n".join(
        [
            CATALOG_HEADING,
            "",
            CATALOG_RULE,
            "",
            "<available_skills>",
            *entries,
            "</available_skills>",
        ]
    )


def pinned_versions(checkpoint: Any) -> dict[str, str] | None:
    """The versions a checkpoint recorded (None: no checkpoint, or none recorded)."""
    if not isinstance(checkpoint, dict) or not checkpoint.get("skills"):
        return None
    recorded = checkpoint["skills"]
    return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else None


def check_unchanged(node: Node, pinned: dict[str, str] | None, versions: dict[str, str]) -> None:
    if pinned is None:
        return
    for name, was in sorted(pinned.items()):
        now = versions.get(name)
        if now != was:
            change = f"{short_hash(was)} -> {short_hash(now)}" if now else "it is gone"
            raise SkillChangedError(
                f"skill {name!r} changed since node {node.id!r} started ({change}): its "
                "conversation used the old version; replay it fresh (dagwright dlq replay "
                "ID --fresh) to run it with the new one"
            )


def loads_skills(node: Node, spec: AgentSpec) -> bool:
    """Whether the node keeps ``load_skill`` (its ``tools:`` may leave it out): with no
    way to load one, a catalog would only cost tokens."""
    return "load_skill" in (spec.tools if node.tools is None else node.tools)


def without_skill_tools(tools: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in tools if name not in SKILL_TOOLS)
