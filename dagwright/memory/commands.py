"""The memory tool's six commands as pure functions over a namespace's files.

The input fields are those of the API's ``memory_20250818`` commands (anthropic SDK
``BetaMemoryTool20250818*Command``): ``view`` (``path``, optional ``view_range``),
``create`` (``path``, ``file_text``), ``str_replace`` (``path``, ``old_str``,
``new_str``), ``insert`` (``path``, ``insert_line``, ``insert_text``), ``delete``
(``path``), ``rename`` (``old_path``, ``new_path``). The result texts are those of the
memory tool's documentation and the SDK's reference implementation, so a model trained on
them reads ours the same way; a refusal is a ``ToolError`` whose text the model is told.

A namespace holds files only (path -> text); a directory is any path some file lies
under, and ``/memories`` always exists. ``create`` creates or overwrites a file (as the
documentation says). A command that writes returns the files it changes (``Change``):
the store applies them at once, or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

from dagwright.errors import ToolError
from dagwright.memory.paths import ROOT, is_under, memory_path, parent_of

LINE_NUMBER_WIDTH = 6
VIEW_DEPTH = 2
WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "delete", "rename"})


class MemoryCommand(BaseModel):
    """One call of the memory tool, as the model sends it (fields by command, above)."""

    model_config = ConfigDict(extra="forbid")

    command: Literal["view", "create", "str_replace", "insert", "delete", "rename"]
    path: str | None = None
    view_range: list[int] | None = None
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    insert_text: str | None = None
    old_path: str | None = None
    new_path: str | None = None

    @property
    def writes(self) -> bool:
        return self.command in WRITE_COMMANDS

    def paths(self) -> list[str]:
        """The paths it names (for the trace), as given."""
        named = (self.path, self.old_path, self.new_path)
        return [path for path in named if path is not None]


@dataclass(frozen=True)
class Change:
    """What a command answers, and the files it writes (path -> new text; None: deleted)."""

    text: str
    writes: dict[str, str | None] = field(default_factory=dict)


def run_command(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    """``command`` over ``files``; ToolError (its text for the model) if it cannot be done."""
    handler = _HANDLERS[command.command]
    return handler(command, files)


def _required(command: MemoryCommand, *names: str) -> None:
    missing = [name for name in names if getattr(command, name) is None]
    if missing:
        raise ToolError(
            f"invalid arguments: the {command.command} command needs {', '.join(missing)}"
        )


def is_directory(path: str, files: Mapping[str, str]) -> bool:
    return path == ROOT or any(is_under(name, path) for name in files)


def _file(path: str, files: Mapping[str, str]) -> str:
    """The text of the file at ``path``; ToolError if there is none."""
    if path in files:
        return files[path]
    if is_directory(path, files):
        raise ToolError(f"The path {path} is not a file.")
    raise ToolError(f"The path {path} does not exist. Please provide a valid path.")


# -- view -------------------------------------------------------------------------------


def view(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "path")
    assert command.path is not None
    path = memory_path(command.path)
    if path in files:
        return Change(_numbered_file(path, files[path], command.view_range))
    if is_directory(path, files):
        return Change(_listing(path, files))
    raise ToolError(f"The path {path} does not exist. Please provide a valid path.")


def _numbered_file(path: str, text: str, view_range: list[int] | None) -> str:
    lines = text.split("\n")
    start = 1
    if view_range is not None:
        if len(view_range) != 2:
            raise ToolError("Invalid `view_range`: it should be a list of two integers")
        first, last = view_range
        start = max(1, first)
        end = len(lines) if last == -1 else last
        lines = lines[start - 1 : end]
    numbered = [
        f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)
    ]
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def _listing(directory: str, files: Mapping[str, str]) -> str:
    """The directory's files and subdirectories, two levels deep, each with its size (a
    directory's: what its files hold); hidden ones (``.name``) left out."""
    sizes: dict[str, int] = {}
    for name, text in files.items():
        if not is_under(name, directory):
            continue
        parts = name[len(directory.rstrip("/")) + 1 :].split("/")
        if any(part.startswith(".") for part in parts):
            continue
        for depth in range(1, min(len(parts), VIEW_DEPTH) + 1):
            shown = "/".join(parts[:depth]) + ("/" if depth < len(parts) else "")
            sizes[shown] = sizes.get(shown, 0) + len(text.encode())
    header = (
        f"Here're the files and directories up to {VIEW_DEPTH} levels deep in {directory}, "
        "excluding hidden items:"
    )
    total = sum(len(text.encode()) for name, text in files.items() if is_under(name, directory))
    lines = [f"{human_size(total)}\t{directory}"]
    lines += [f"{human_size(size)}\t{directory}/{name}" for name, size in sorted(sizes.items())]
    return header + "\n" + "\n".join(lines)


def human_size(size: int) -> str:
    """``size`` bytes as ``ls -h`` shows it: 0B, 512B, 1.5K, 2M."""
    value = float(size)
    for unit in ("B", "K", "M"):
        if value < 1024:
            return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"
        value /= 1024
    return f"{value:.1f}G"


# -- create, str_replace, insert ---------------------------------------------------------


def create(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "path", "file_text")
    assert command.path is not None and command.file_text is not None
    path = memory_path(command.path)
    if path == ROOT or (path not in files and is_directory(path, files)):
        raise ToolError(f"The path {path} is a directory; give a file path")
    _refuse_file_as_directory(path, files)
    return Change(f"File created successfully at: {path}", {path: command.file_text})


def _refuse_file_as_directory(path: str, files: Mapping[str, str]) -> None:
    """ToolError if a directory of ``path`` is a file (``/memories/a`` for ``/memories/a/b``)."""
    directory = parent_of(path)
    while directory != ROOT:
        if directory in files:
            raise ToolError(f"The path {directory} is a file, not a directory")
        directory = parent_of(directory)


def str_replace(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "path", "old_str", "new_str")
    assert command.path is not None and command.old_str is not None
    assert command.new_str is not None
    path = memory_path(command.path)
    text, old = _file(path, files), command.old_str
    found = _occurrences(text, old)
    if not found:
        raise ToolError(
            f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        )
    if len(found) > 1:
        lines = ", ".join(str(text[:at].count("\n") + 1) for at in found)
        raise ToolError(
            f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
            f"{lines}. Please ensure it is unique"
        )
    edited = text.replace(old, command.new_str, 1)
    changed_line = text[: found[0]].count("\n")
    return Change(_edited_snippet(edited, changed_line), {path: edited})


def _occurrences(text: str, old: str) -> list[int]:
    if not old:
        return []
    found, at = [], text.find(old)
    while at != -1:
        found.append(at)
        at = text.find(old, at + 1)
    return found


def _edited_snippet(text: str, changed_line: int) -> str:
    lines = text.split("\n")
    first, last = max(0, changed_line - 2), min(len(lines), changed_line + 3)
    snippet = [f"{str(n + 1).rjust(LINE_NUMBER_WIDTH)}\t{lines[n]}" for n in range(first, last)]
    return (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + "\n".join(snippet)
    )


def insert(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "path", "insert_line", "insert_text")
    assert command.path is not None and command.insert_text is not None
    assert command.insert_line is not None
    path = memory_path(command.path)
    lines = _file(path, files).split("\n")
    if lines[-1] == "":  # the empty tail of a text ending in a new line is no line
        lines.pop()
    if not 0 <= command.insert_line <= len(lines):
        raise ToolError(
            f"Invalid `insert_line` parameter: {command.insert_line}. "
            f"It should be within the range [0, {len(lines)}]."
        )
    lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
    return Change(f"The file {path} has been edited.", {path: "\n".join(lines) + "\n"})


# -- delete, rename ----------------------------------------------------------------------


def delete(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "path")
    assert command.path is not None
    path = memory_path(command.path)
    if path == ROOT:
        raise ToolError("Cannot delete the /memories directory itself")
    gone: dict[str, str | None] = {name: None for name in files if is_under(name, path)}
    if path in files:
        gone[path] = None
    if not gone:
        raise ToolError(f"The path {path} does not exist")
    return Change(f"Successfully deleted {path}", gone)


def rename(command: MemoryCommand, files: Mapping[str, str]) -> Change:
    _required(command, "old_path", "new_path")
    assert command.old_path is not None and command.new_path is not None
    old, new = memory_path(command.old_path), memory_path(command.new_path)
    if old == ROOT:
        raise ToolError("Cannot rename the /memories directory itself")
    if new in files or is_directory(new, files):
        raise ToolError(f"The destination {new} already exists")
    if old == new or is_under(new, old):
        raise ToolError(f"Cannot move {old} into itself")
    moved = {name: name for name in files if is_under(name, old)}
    if old in files:
        moved[old] = old
    if not moved:
        raise ToolError(f"The path {old} does not exist")
    _refuse_file_as_directory(new, files)
    writes: dict[str, str | None] = {name: None for name in moved}
    for name in moved:
        writes[new + name[len(old) :]] = files[name]
    return Change(f"Successfully renamed {old} to {new}", writes)


_HANDLERS = {
    "view": view,
    "create": create,
    "str_replace": str_replace,
    "insert": insert,
    "delete": delete,
    "rename": rename,
}
