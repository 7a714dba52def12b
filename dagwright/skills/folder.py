"""A skill folder, read whole into memory: its files, their content hash, and the path
rules of what an agent may read of it.

The folder is read once (when the registry is built), within bounds
(``skill_max_files``, ``skill_max_bytes``): what the agent loads, reads and runs is these
bytes, the very ones the hash covers, never the folder as it is later. A symbolic link is
followed only if it stays inside the folder; one that leads out (or dangles) refuses the
skill, as a path with ``..`` or an absolute path refuses a read.

The content hash is sha256 over every file, sorted by path: each file as its path, a NUL,
its length, a NUL, its bytes. A changed, added, removed or renamed file changes it.

Rejected: reading the folder at each call (a skill edited during a run would give one
node two versions, and the checkpoint's hash would not say which one ran).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dagwright.errors import MalformedSkillError, ToolError
from dagwright.skills.manifest import SKILL_FILE, SkillManifest, parse_skill_md

HASH_PREFIX = "sha256:"
SHORT_HASH_CHARS = 12  # of the hex digest, in tables and one-line messages
RESOURCE_FOLDERS = ("scripts", "references", "assets")


@dataclass(frozen=True)
class SkillLimits:
    """How big a skill folder may be."""

    max_files: int = 256
    max_bytes: int = 4 * 1024 * 1024


@dataclass(frozen=True)
class Skill:
    """One skill: its manifest, where it was found, its files (relative POSIX path ->
    bytes) and their content hash."""

    manifest: SkillManifest
    folder: Path
    files: dict[str, bytes]
    content_hash: str

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def short_hash(self) -> str:
        return short_hash(self.content_hash)

    @property
    def resources(self) -> list[str]:
        """Every file but SKILL.md, sorted."""
        return sorted(path for path in self.files if path != SKILL_FILE)

    @property
    def scripts(self) -> list[str]:
        return [path for path in self.resources if path.startswith("scripts/")]

    def file(self, path: str) -> bytes:
        """The bytes of the file at ``path`` (relative to the folder); ToolError, saying
        which files there are, for a path that escapes or names none."""
        normal = resource_path(path)
        if normal not in self.files:
            listed = ", ".join(self.resources) or "none"
            raise ToolError(f"skill {self.name!r} has no file {path!r}; its files: {listed}")
        return self.files[normal]


def short_hash(content_hash: str) -> str:
    return content_hash.removeprefix(HASH_PREFIX)[:SHORT_HASH_CHARS]


def resource_path(path: str) -> str:
    """``path`` as a relative POSIX path inside a skill folder; ToolError for an absolute
    path, a ``..``, a backslash or a control character."""
    if not path or path.startswith("/") or "\\" in path or any(ord(c) < 32 for c in path):
        raise ToolError(f"{path!r} is not a path inside the skill (relative, like references/x.md)")
    parts = PurePosixPath(path).parts
    if any(part in ("..", ".") for part in parts):
        raise ToolError(f"{path!r} leaves the skill's folder: no '..' or '.' parts")
    return "/".join(parts)


def read_skill(folder: Path, limits: SkillLimits) -> Skill:
    """The skill in ``folder``; MalformedSkillError (one line) if its SKILL.md is not
    one the specification allows, or the folder breaks the bounds or the link rule."""
    files = read_files(folder, limits)
    try:
        text = files[SKILL_FILE].decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedSkillError(f"skill {folder.name!r}: SKILL.md is not UTF-8") from None
    manifest = parse_skill_md(text, folder.name)
    return Skill(manifest, folder, files, content_hash(files))


def read_files(folder: Path, limits: SkillLimits) -> dict[str, bytes]:
    """Every regular file under ``folder`` by relative path, within ``limits``."""
    root = folder.resolve()
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(walk(folder)):
        relative = path.relative_to(folder).as_posix()
        target = path.resolve()
        if target != root and root not in target.parents:
            raise MalformedSkillError(
                f"skill {folder.name!r}: {relative} is a link out of the skill's folder"
            )
        if not target.is_file():
            continue
        data = target.read_bytes()
        total += len(data)
        if len(files) >= limits.max_files or total > limits.max_bytes:
            raise MalformedSkillError(
                f"skill {folder.name!r}: more than {limits.max_files} files or "
                f"{limits.max_bytes} bytes (skill_max_files, skill_max_bytes)"
            )
        files[relative] = data
    if SKILL_FILE not in files:
        raise MalformedSkillError(f"skill {folder.name!r}: no SKILL.md in {folder}")
    return files


def walk(folder: Path) -> list[Path]:
    """Every path under ``folder`` (links not followed into directories; hidden files
    such as ``.DS_Store`` and ``.git`` left out: they are no part of a skill)."""
    found = []
    for directory, subdirs, names in os.walk(folder):
        subdirs[:] = [d for d in subdirs if not d.startswith(".")]
        base = Path(directory)
        found += [base / name for name in names if not name.startswith(".")]
        found += [base / d for d in subdirs if (base / d).is_symlink()]
    return found


def content_hash(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        data = files[path]
        digest.update(path.encode() + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    return HASH_PREFIX + digest.hexdigest()
