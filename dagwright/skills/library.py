"""The skills of a deployment: every folder holding a ``SKILL.md`` directly inside one of
``settings.skills.dirs``, read when a process builds its registry.

A malformed skill refuses the whole library, with one line naming the folder and what to
fix (a worker does not start half-equipped; ``dagwright doctor`` says the same line). Two
folders of one name in two directories are refused too: which one an agent type means
would depend on the order of the list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dagwright.errors import ConfigurationError, InputError, MalformedSkillError
from dagwright.settings import Settings
from dagwright.skills.folder import Skill, SkillLimits, read_skill
from dagwright.skills.manifest import SKILL_FILE


@dataclass(frozen=True)
class SkillLibrary:
    """Skills by name."""

    skills: dict[str, Skill] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> SkillLibrary:
        limits = SkillLimits(settings.skills.max_files, settings.skills.max_bytes)
        return cls.load(settings.skills.dirs, limits)

    @classmethod
    def load(cls, directories: Iterable[Path], limits: SkillLimits) -> SkillLibrary:
        """The skills of ``directories``; MalformedSkillError or ConfigurationError (one
        line) on a malformed skill, a missing directory or a name found twice."""
        skills: dict[str, Skill] = {}
        for directory in directories:
            for folder in skill_folders(directory):
                skill = _read(folder, limits)
                if skill.name in skills:
                    raise ConfigurationError(
                        f"two skills are named {skill.name!r}: {skills[skill.name].folder} "
                        f"and {folder} (skill_dirs): remove or rename one"
                    )
                skills[skill.name] = skill
        return cls(skills)

    def names(self) -> list[str]:
        return sorted(self.skills)

    def get(self, name: str) -> Skill:
        """The skill ``name``; InputError naming the skills there are."""
        try:
            return self.skills[name]
        except KeyError:
            known = ", ".join(self.names()) or "none (skill_dirs)"
            raise InputError(f"no skill {name!r}; the skills here: {known}") from None


def skill_folders(directory: Path) -> list[Path]:
    """The folders directly inside ``directory`` that hold a SKILL.md, by name."""
    if not directory.is_dir():
        raise ConfigurationError(f"skill_dirs names {directory}, which is no directory")
    return sorted(
        child
        for child in directory.iterdir()
        if not child.name.startswith(".") and (child / SKILL_FILE).is_file()
    )


def _read(folder: Path, limits: SkillLimits) -> Skill:
    try:
        return read_skill(folder, limits)
    except MalformedSkillError as exc:
        raise MalformedSkillError(f"{exc} ({folder / SKILL_FILE})") from None
    except OSError as exc:
        raise MalformedSkillError(f"skill {folder.name!r}: cannot be read: {exc}") from None
