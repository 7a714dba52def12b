"""Agent Skills: where skills are read from, which agent types they attach to, and their bounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dagwright.settings.section import Section

SKILL_TOOLS = ("load_skill", "read_skill_file", "run_skill_script")
"""The tools an agent type with skills is offered (``workers/tools/skills.py``)."""


class SkillToolRule(BaseModel):
    """A policy rule on the skill tools of an agent type (as ``PolicyRule``, for
    ``load_skill``, ``read_skill_file`` and ``run_skill_script`` only): tried before the
    type's own rules, first match wins. ``when`` matches the call's arguments, e.g.
    ``{skill = "release-notes"}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Literal["load_skill", "read_skill_file", "run_skill_script"]
    """Which skill tool: these rules cannot widen what a type may do with other tools."""
    action: Literal["allow", "deny", "require_approval"]
    """What happens to a matching call."""
    when: dict[str, str] = Field(default_factory=dict)
    """Argument name -> glob its value must match (all of them): ``skill``, ``script``..."""
    reason: str = ""
    """Why: shown to the model when the call is refused, and audited."""


class AgentSkillsSettings(BaseModel):
    """The skills attached to one agent type; a plain list is the skills alone
    (``researcher = ["release-notes"]``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skills: list[str] = Field(default_factory=list)
    """Names of skills (folders of ``skill_dirs``) the type's catalog lists."""
    rules: list[SkillToolRule] = Field(default_factory=list)
    """Policy rules on the skill tools, tried before the ones attaching adds (loading a
    skill and reading its files allowed, running a script denied): ``[{tool =
    "run_skill_script", action = "allow"}]`` lets its scripts run in the sandbox."""

    @model_validator(mode="before")
    @classmethod
    def _list_is_skills(cls, value: Any) -> Any:
        return {"skills": value} if isinstance(value, list) else value


class SkillSettings(Section):
    """Agent Skills: where they are read from, the agent types they attach to, their bounds."""

    prefix: ClassVar[str] = "skill_"
    flat_names: ClassVar[dict[str, str]] = {"agent_skills": "agent_skills"}

    dirs: list[Path] = Field(default_factory=list)
    """Directories of Agent Skills: each folder directly inside one that holds a
    ``SKILL.md`` is a skill (docs/skills.md). Read when a process builds its registry; a
    malformed skill stops it there, with one line."""

    agent_skills: dict[str, AgentSkillsSettings] = Field(default_factory=dict)
    """Skills attached to agent types, by type name: ``[agent_skills]`` ``researcher =
    ["release-notes"]``, or ``[agent_skills.coder]`` ``skills = [...]`` ``rules = [...]``.
    The type's system prompt lists their names and descriptions; the model loads a body,
    reads a file or runs a script (in the sandbox) with the skill tools, under the policy."""

    max_files: int = Field(256, ge=1)
    """Most files one skill folder may hold (SKILL.md included)."""

    max_bytes: int = Field(4 * 1024 * 1024, ge=1)
    """Most bytes one skill folder may hold, all its files together."""
