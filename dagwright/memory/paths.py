"""Memory paths: every command names files under ``/memories``, and nothing else.

The model writes the paths, so they are untrusted: one that does not start at
``/memories``, names ``..`` or ``.``, carries a control character or is longer than
``MAX_PATH_CHARS`` is refused with a ``ToolError`` the model is told. What is accepted is
normalised (one ``/`` between segments, none at the end), so ``/memories//a/`` and
``/memories/a`` are one file.
"""

from __future__ import annotations

from dagwright.errors import ToolError

ROOT = "/memories"
MAX_PATH_CHARS = 512


def memory_path(path: str) -> str:
    """``path`` normalised; ToolError if it is not a path under ``/memories``."""
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"The path is longer than {MAX_PATH_CHARS} characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in path):
        raise ToolError(f"The path {path!r} contains a control character")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise ToolError(
            f"The path {path} is outside /memories: every path must start with /memories"
        )
    segments = [segment for segment in path[len(ROOT) :].split("/") if segment]
    if any(segment in ("..", ".") for segment in segments):
        raise ToolError(f"The path {path} would escape /memories directory")
    return "/".join([ROOT, *segments])


def parent_of(path: str) -> str:
    """The directory holding ``path`` (``/memories`` for a file at the top)."""
    return path.rsplit("/", 1)[0] or ROOT


def is_under(path: str, directory: str) -> bool:
    """Whether ``path`` lies inside ``directory`` (not ``directory`` itself)."""
    return path.startswith(directory.rstrip("/") + "/")
