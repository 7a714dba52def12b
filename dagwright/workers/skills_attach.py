"""Giving agent types their skills, when the registry is built.

A type's skills are those its ``AgentSpec.skills`` names and those
``settings.skills.agent_skills[<type>]`` adds (built-in types included), read from
``settings.skills.dirs`` (``skills/library.py``: a malformed skill, or a name no folder
has, stops the registry's build with one line). Attaching adds the three skill tools to
the type's tools, and to its policy, tried before the type's own rules: the
``agent_skills`` rules, then allow ``load_skill`` and ``read_skill_file`` (they read what
the deployment installed and attached). ``run_skill_script`` gets no rule: it runs code,
so it is denied until a rule allows it (decision 91), as every tool is by default.

The skills (their bytes, their hashes) become ``AgentSpec.attached_skills`` and the type's
declaration, as the memory tool's attach does (``memory_attach.py``); the agent loop then
equips each node (``agent_skills.py``).
"""

from __future__ import annotations

from dataclasses import replace

from dagwright.errors import ConfigurationError
from dagwright.settings import SKILL_TOOLS, AgentSkillsSettings, Settings
from dagwright.skills.library import SkillLibrary
from dagwright.workers.agent_spec import AgentSpec
from dagwright.workers.builtin_agents import agent_worker_type
from dagwright.workers.registry import WorkerRegistry
from dagwright.workers.tools.policy import PolicyAction, PolicyRule, ToolPolicy

READ_RULES = [
    PolicyRule(tool=name, action=PolicyAction.ALLOW) for name in ("load_skill", "read_skill_file")
]


def attach_skills(registry: WorkerRegistry, settings: Settings) -> SkillLibrary:
    """Read the skills of ``settings.skills.dirs`` and give each agent type its own;
    MalformedSkillError or ConfigurationError (one line) on a malformed skill, an unknown
    skill or an unknown type. Returns the library (empty when no directory is set)."""
    library = SkillLibrary.from_settings(settings)
    agents = agent_names(registry)
    unknown_types = sorted(set(settings.skills.agent_skills) - set(agents))
    if unknown_types:
        raise ConfigurationError(
            f"agent_skills names {', '.join(unknown_types)}, which is no agent type: the "
            f"agent types are {', '.join(agents)}"
        )
    for name in agents:
        spec = registry.declaration(name)
        assert isinstance(spec, AgentSpec)
        attached = settings.skills.agent_skills.get(name, AgentSkillsSettings())
        names = tuple(dict.fromkeys([*spec.skills, *attached.skills]))
        if names:
            equipped = equipped_spec(spec, names, attached, library)
            registry.replace_type(agent_worker_type(equipped, registry.tools), declaration=equipped)
    return library


def agent_names(registry: WorkerRegistry) -> list[str]:
    return [
        wt.name for wt in registry.types() if isinstance(registry.declaration(wt.name), AgentSpec)
    ]


def equipped_spec(
    spec: AgentSpec, names: tuple[str, ...], attached: AgentSkillsSettings, library: SkillLibrary
) -> AgentSpec:
    """``spec`` with the skills ``names``, the skill tools and their rules."""
    missing = [name for name in names if name not in library.skills]
    if missing:
        known = ", ".join(library.names()) or "none (set skill_dirs)"
        raise ConfigurationError(
            f"agent type {spec.name!r} is given unknown skill(s) {', '.join(missing)}: the "
            f"skills of skill_dirs are {known}"
        )
    rules = [PolicyRule.model_validate(rule.model_dump()) for rule in attached.rules]
    tools = (*spec.tools, *(tool for tool in SKILL_TOOLS if tool not in spec.tools))
    return replace(
        spec,
        skills=names,
        attached_skills=tuple(library.skills[name] for name in names),
        tools=tools,
        policy=ToolPolicy(rules=[*rules, *READ_RULES, *spec.policy.rules]),
    )
