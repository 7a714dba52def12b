"""``SKILL.md``: YAML front matter between ``---`` lines, then Markdown instructions.

The front matter is what the Agent Skills specification defines, and only that:

- ``name`` (required): 1-64 characters, lowercase letters, digits and hyphens, neither
  starting nor ending with a hyphen, no ``--``; the same as the folder's name;
- ``description`` (required): 1-1024 characters, what the skill does and when to use it
  (the catalog shows it);
- ``license`` (optional): a license name or the file that holds it;
- ``compatibility`` (optional): 1-500 characters, what the skill needs of its host;
- ``metadata`` (optional): a map of string keys to string values;
- ``allowed-tools`` (optional, experimental in the specification): space-delimited tool
  names the skill expects to use. Recorded and shown; it grants nothing here (the type's
  policy decides every call, decision 91).

Any other field is refused, as the specification's reference validator (``skills-ref``)
does: a misspelt ``descripton`` must not leave a skill with no description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from dagwright.errors import MalformedSkillError

SKILL_FILE = "SKILL.md"
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_COMPATIBILITY_CHARS = 500
FIELDS = frozenset({"name", "description", "license", "compatibility", "metadata", "allowed-tools"})


@dataclass(frozen=True)
class SkillManifest:
    """What ``SKILL.md`` says: its front matter's fields and its body (the instructions)."""

    name: str
    description: str
    body: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] = ()


def parse_skill_md(text: str, folder_name: str) -> SkillManifest:
    """``text`` (a ``SKILL.md``) as a manifest; MalformedSkillError saying what is wrong,
    in one line, if it is not one the specification allows in folder ``folder_name``."""
    front, body = split_front_matter(text, folder_name)
    unknown = sorted(set(front) - FIELDS)
    if unknown:
        raise _malformed(
            folder_name,
            f"unknown front matter field(s) {', '.join(unknown)} "
            f"(the specification allows {', '.join(sorted(FIELDS))})",
        )
    name = _text_field(front, "name", folder_name, MAX_NAME_CHARS, required=True)
    _check_name(name, folder_name)
    return SkillManifest(
        name=name,
        description=_text_field(
            front, "description", folder_name, MAX_DESCRIPTION_CHARS, required=True
        ),
        body=body.strip(),
        license=_text_field(front, "license", folder_name, None, required=False) or None,
        compatibility=_text_field(
            front, "compatibility", folder_name, MAX_COMPATIBILITY_CHARS, required=False
        )
        or None,
        metadata=_metadata(front.get("metadata"), folder_name),
        allowed_tools=_allowed_tools(front.get("allowed-tools"), folder_name),
    )


def split_front_matter(text: str, folder_name: str) -> tuple[dict[str, Any], str]:
    """The front matter (a YAML mapping) and the body after it."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _malformed(folder_name, "SKILL.md must start with YAML front matter (a --- line)")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if end is None:
        raise _malformed(folder_name, "SKILL.md's front matter has no closing --- line")
    try:
        front = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise _malformed(folder_name, f"its front matter is not valid YAML{line}") from None
    if not isinstance(front, dict):
        raise _malformed(folder_name, "its front matter must be a YAML mapping (name: ...)")
    return front, "".join(lines[end + 1 :])


def _text_field(
    front: dict[str, Any], key: str, folder: str, limit: int | None, *, required: bool
) -> str:
    value = front.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise _malformed(folder, f"`{key}` must be a non-empty string")
    if limit is not None and len(value) > limit:
        raise _malformed(folder, f"`{key}` is {len(value)} characters long; at most {limit}")
    return value.strip()


def _check_name(name: str, folder: str) -> None:
    if not NAME_PATTERN.match(name):
        raise _malformed(
            folder,
            f"`name: {name}` must be lowercase letters, digits and single hyphens, "
            "neither starting nor ending with a hyphen",
        )
    if name != folder:
        raise _malformed(folder, f"`name: {name}` must be the folder's name ({folder})")


def _metadata(value: Any, folder: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _malformed(folder, "`metadata` must map string keys to string values")
    return dict(value)


def _allowed_tools(value: Any, folder: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, str):
        raise _malformed(folder, "`allowed-tools` must be a string of space-separated names")
    return tuple(value.split())


def _malformed(folder: str, problem: str) -> MalformedSkillError:
    return MalformedSkillError(f"skill {folder!r}: {problem}")
