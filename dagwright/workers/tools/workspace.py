"""The per-run workspace of the workspace tools: files shared by a run's nodes.

Paths come from a model, so they are checked before any use: relative, no ``..``, no
empty or hidden-trick components. Two backends: Redis (the default: every worker host
sees the same files) and disk (one host; a directory per run). On disk every directory
on the way is opened with O_NOFOLLOW relative to its parent, so a symlink planted
inside the workspace cannot lead a read or a write out of it, even in a race. The run's
directory itself is opened with O_NOFOLLOW too: one that is a symlink (planted by
anything that can write to ``workspace_dir``) is refused, not followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Protocol

import redis

from dagwright.errors import ToolError

MAX_PATH_CHARS = 255


class Workspace(Protocol):
    def read(self, path: str) -> str: ...

    def write(self, path: str, content: str) -> int: ...

    def list(self) -> list[str]: ...


def normalize_path(path: str) -> str:
    """A safe relative POSIX path, or ToolError saying what is wrong with it."""
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise ToolError(f"invalid path {path[:40]!r}: give a relative path of 1-255 characters")
    if "\\" in path:
        raise ToolError(f"invalid path {path!r}: use / to separate directories")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ToolError(f"invalid path {path!r}: absolute paths are refused; give a relative one")
    parts = [part for part in pure.parts if part != "."]
    if not parts or ".." in parts:
        raise ToolError(f"invalid path {path!r}: '..' is refused; stay inside the workspace")
    return "/".join(parts)


def check_size(content: str, limit: int) -> bytes:
    data = content.encode()
    if len(data) > limit:
        raise ToolError(f"the content is {len(data)} bytes; the workspace limit is {limit}")
    return data


class RedisWorkspace:
    """Files as fields of one Redis hash (the run's ``workspace`` key). Writes go through
    ``write_file(path, content)``, which the orchestrator fences: a worker that lost its
    node writes nothing."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        *,
        max_bytes: int,
        write_file: Callable[[str, str], None],
    ) -> None:
        self.client = client
        self.key = key
        self.max_bytes = max_bytes
        self.write_file = write_file

    def read(self, path: str) -> str:
        content = self.client.hget(self.key, normalize_path(path))
        if content is None:
            raise ToolError(f"no file {path!r} in the workspace")
        return str(content)

    def write(self, path: str, content: str) -> int:
        data = check_size(content, self.max_bytes)
        self.write_file(normalize_path(path), content)
        return len(data)

    def list(self) -> list[str]:
        return sorted(self.client.hkeys(self.key))


class DiskWorkspace:
    """Files under ``root`` (one directory per run)."""

    def __init__(self, root: Path, *, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes

    def read(self, path: str) -> str:
        relative = normalize_path(path)
        fd = self._open_in_workspace(relative, os.O_RDONLY, create_dirs=False)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise ToolError(f"{path!r} is larger than the workspace limit ({self.max_bytes} bytes)")
        return data.decode(errors="replace")

    def write(self, path: str, content: str) -> int:
        data = check_size(content, self.max_bytes)
        relative = normalize_path(path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        fd = self._open_in_workspace(relative, flags, create_dirs=True)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return len(data)

    def list(self) -> list[str]:
        if not os.path.lexists(self.root):
            return []
        root_fd = self._open_root()
        try:  # walked from the descriptor: fwalk never follows a link
            walked = os.fwalk(".", dir_fd=root_fd)
            found = [
                os.path.normpath(os.path.join(directory, name))
                for directory, _, files, _ in walked
                for name in files
            ]
        finally:
            os.close(root_fd)
        return sorted(found)

    def _open_root(self) -> int:
        """The run's directory, created if missing, opened without following a link."""
        with contextlib.suppress(FileExistsError):  # a link to nowhere, a file: refused below
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            return os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                refusal = "the run's workspace directory is a symbolic link or not a directory"
                raise ToolError(f"{refusal}: refused, not followed") from exc
            raise

    def _open_in_workspace(self, relative: str, flags: int, *, create_dirs: bool) -> int:
        *directories, name = relative.split("/")
        fd = self._open_root()
        try:
            for directory in directories:
                child = _open_directory(fd, directory, create=create_dirs)
                os.close(fd)
                fd = child
            return os.open(name, flags | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        except OSError as exc:
            raise _refusal(exc, relative) from exc
        finally:
            os.close(fd)


def _open_directory(parent_fd: int, directory: str, *, create: bool) -> int:
    """Open (and maybe create) ``directory`` inside ``parent_fd``, never through a link."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700, dir_fd=parent_fd)
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)


def _refusal(exc: OSError, path: str) -> ToolError:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return ToolError(
            f"{path!r} goes through a symbolic link; links out of the workspace are refused"
        )
    if exc.errno == errno.ENOENT:
        return ToolError(f"no file {path!r} in the workspace")
    return ToolError(f"cannot use {path!r}: {exc.strerror}")
