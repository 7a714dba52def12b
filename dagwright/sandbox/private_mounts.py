"""Host directories bwrap could not reach by path, made reachable for one execution only.

Started by a root worker, bwrap runs as the sandbox uid, and resolves the sources of its
binds by path as that uid: a tree under a 0700 directory (a virtualenv in root's home) is
out of its reach, even passed as a descriptor (bwrap turns ``/proc/self/fd/N`` back into a
path). So, between fork and exec, still root, the child enters a mount namespace of its
own and binds each such tree onto an empty directory every uid can reach
(``MOUNT_POINTS``); bwrap, its only process, binds it from there into the sandbox. The host
sees none of it: the namespace ends with bwrap. Rejected: binding the trees in the host's
namespace (every process would see them, and a crash would leave them mounted); loosening
the home's permissions.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
from pathlib import Path

from dagwright.sandbox.bwrap_binary import CACHE_DIRS, owned_by_root_and_closed

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_BIND = 0x1000
MS_PRIVATE = 1 << 18

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_point_for(tree: str) -> str | None:
    """An empty root-owned directory every uid can enter, to bind ``tree`` on (made once,
    named by the tree's path); None if none can be made."""
    name = "mnt-" + hashlib.sha256(tree.encode()).hexdigest()[:16]
    for directory in CACHE_DIRS:
        if owned_by_root_and_closed(directory):
            point = Path(directory) / name
            try:
                point.mkdir(mode=0o755, exist_ok=True)
                os.chmod(point, 0o755)
            except OSError:
                continue
            return str(point)
    return None


def bind_privately(binds: list[tuple[str, str]]) -> None:
    """In the calling process (the child, before exec): a mount namespace of its own, in
    which each ``(tree, point)`` is bound. System calls only: it runs after fork."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate")
    for tree, point in binds:
        _check(_libc.mount(tree.encode(), point.encode(), None, MS_BIND | MS_REC, None), "bind")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
