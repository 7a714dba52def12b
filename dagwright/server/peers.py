"""Whose process is at the other end of a loopback connection, for anonymous access.

A loopback port is reachable by every user of the machine, not only by the one who ran
``dagwright up`` (whose Valkey socket is theirs alone). So the anonymous admin is granted
only to connections opened by a process of the server's own user. Linux says who owns a
TCP socket in ``/proc/net/tcp`` and ``tcp6`` (as identd reads it): the client's socket is
the row whose local port is the connection's peer port and whose remote port is ours.
Where that table does not exist (not Linux) the owner is unknown, and the check is the
loopback Host's alone.
"""

from __future__ import annotations

import os
from pathlib import Path

TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
UID_COLUMN = 7  # sl, local_address, rem_address, st, queues, timer, retrnsmt, uid, ...


def socket_owner(peer_port: int, server_port: int) -> int | None:
    """The uid owning the local socket ``peer_port`` connected to ``server_port``; None
    if no table tells (not Linux, or the connection is gone)."""
    for table in TCP_TABLES:
        try:
            rows = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if _port(fields[1]) == peer_port and _port(fields[2]) == server_port:
                return int(fields[UID_COLUMN])
    return None


def _port(address: str) -> int:
    """The port of a table's ``HEXADDR:HEXPORT``."""
    return int(address.rsplit(":", 1)[1], 16)


def opened_by_this_user(peer_port: int, server_port: int) -> bool:
    """Whether the connection's client is a process of this server's user (True where the
    system cannot tell: see the module's docstring)."""
    if not any(table.exists() for table in TCP_TABLES):
        return True
    return socket_owner(peer_port, server_port) == os.getuid()
