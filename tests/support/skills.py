"""Skill folders for tests: the example skill shipped under examples/skills, and ones
written on the spot."""

from __future__ import annotations

from pathlib import Path

EXAMPLE_SKILLS = Path(__file__).resolve().parents[2] / "examples" / "skills"
RELEASE_NOTES = "release-notes"
RELEASE_NOTES_BODY_LINE = "Group the changes: run `scripts/group_changes.py`"


def write_skill(
    directory: Path, name: str, description: str = "Does a thing.", body: str = "Do it."
) -> Path:
    """A minimal valid skill folder ``directory/name``."""
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )
    return folder
