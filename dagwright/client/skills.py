"""The skills of a deployment as ``dagwright skills list|show`` print them (and
``--json``): read from ``skill_dirs`` as a worker reads them, with the agent types each
is given (``agent_skills``, ``AgentSpec.skills``). No Redis: skills are files of the
deployment, like its worker types (``client/catalog.py``)."""

from __future__ import annotations

from typing import Any

from dagwright.settings import Settings
from dagwright.skills.folder import Skill


def describe_skills(settings: Settings) -> list[dict[str, Any]]:
    """Every skill, by name: what the catalog shows of it, its hash, and its types.
    MalformedSkillError (one line) as a starting worker would refuse."""
    from dagwright.registry import build_registry
    from dagwright.skills.library import SkillLibrary

    library = SkillLibrary.from_settings(settings)
    types = build_registry(settings).types()
    return [
        describe(skill, [wt.name for wt in types if name in wt.skills])
        for name, skill in sorted(library.skills.items())
    ]


def describe_skill(settings: Settings, name: str) -> dict[str, Any]:
    """One skill, with its body; InputError naming the skills there are."""
    from dagwright.registry import build_registry
    from dagwright.skills.library import SkillLibrary

    skill = SkillLibrary.from_settings(settings).get(name)
    types = [wt.name for wt in build_registry(settings).types() if name in wt.skills]
    return {**describe(skill, types), "body": skill.manifest.body}


def describe(skill: Skill, types: list[str]) -> dict[str, Any]:
    manifest = skill.manifest
    return {
        "name": skill.name,
        "description": manifest.description,
        "content_hash": skill.content_hash,
        "folder": str(skill.folder),
        "files": skill.resources,
        "bytes": sum(len(data) for data in skill.files.values()),
        "license": manifest.license,
        "compatibility": manifest.compatibility,
        "metadata": manifest.metadata,
        "allowed_tools": list(manifest.allowed_tools),
        "types": types,
    }
