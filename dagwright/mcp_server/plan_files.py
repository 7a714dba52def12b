"""Plan files an MCP client may submit by name: those directly inside
``settings.mcp.plan_dir``, and no others.

A client names a file (``weekly-report.yaml``), never a path: the name is checked before
the file system is asked anything, and the file found must lie in the directory itself
(a symbolic link out of it is refused). With no directory set, nothing is offered: the
MCP server reads no file of the host on a client's word by default.
"""

from __future__ import annotations

import re
from pathlib import Path

from dagwright.errors import InputError

PLAN_SUFFIXES = (".yaml", ".yml", ".json")
PLAN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
NO_PLAN_DIR = (
    "no plan files are offered: set DAGWRIGHT_MCP_PLAN_DIR (mcp_plan_dir) to the directory "
    "whose plans MCP clients may submit by name"
)


class PlanFileError(InputError):
    """A plan file named by an MCP client is not one it may submit (the reason is said)."""


class PlanFiles:
    """The plan files of one directory (None: no directory, nothing offered)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def names(self) -> list[str]:
        """The names of the plan files offered, sorted ([] with no directory)."""
        if self.directory is None or not self.directory.is_dir():
            return []
        return sorted(path.name for path in self.directory.iterdir() if self._offered(path))

    def path(self, name: str) -> Path:
        """The file of ``name``; PlanFileError if it is not one offered."""
        if self.directory is None:
            raise PlanFileError(NO_PLAN_DIR)
        if not PLAN_NAME.fullmatch(name) or not name.lower().endswith(PLAN_SUFFIXES):
            raise PlanFileError(
                f"{name[:100]!r} is not a plan file name: a plain name ending in "
                f"{', '.join(PLAN_SUFFIXES)} (list_plan_files shows those offered)"
            )
        path = self.directory / name
        if not self._offered(path):
            raise PlanFileError(f"no plan file {name!r} is offered (list_plan_files shows them)")
        return path

    def _offered(self, path: Path) -> bool:
        """A regular file of an offered suffix whose real location is in the directory."""
        assert self.directory is not None
        if not path.name.lower().endswith(PLAN_SUFFIXES) or not path.is_file():
            return False
        return path.resolve().parent == self.directory.resolve()
