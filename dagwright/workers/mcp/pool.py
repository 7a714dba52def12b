"""The MCP servers of one worker process: started on first use, kept, restarted.

A server is started when a node first needs it (a worker serving no MCP agent starts
none) and kept for every node after, in every thread of the process. A call to a server
that died (its process killed or crashed, its HTTP endpoint restarted) restarts it and
makes the call once more; a restart is logged, and is a span of the node that saw it.

One pool per process. A pool copied into a forked child (Celery's prefork pool forks
after the registry is built) starts afresh there: the parent's event-loop thread and
server processes do not exist in the child, and are never touched by it.

Rejected: the SDK's ``ClientSessionGroup``, which aggregates servers into one session.
It renames tools its own way, and one dead server cannot be restarted alone.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from mcp_types import CallToolResult, Tool

from dagwright.redaction import redact
from dagwright.settings import McpServerSettings
from dagwright.workers.mcp.connection import EventLoopThread, McpConnection, ServerGoneError

log = logging.getLogger(__name__)

RestartSpan = Callable[[], AbstractContextManager[Any]]


class McpServers:
    """The servers of ``configs`` this process uses, each connected once."""

    def __init__(
        self, configs: Mapping[str, McpServerSettings], errlog: TextIO = sys.stderr
    ) -> None:
        self.configs = dict(configs)
        self.errlog = errlog
        # What the servers are given from the environment, kept out of the log lines.
        self._secrets = tuple(value for c in configs.values() for value in c.secret_values())
        self._lock = threading.Lock()
        self._server_locks: dict[str, threading.Lock] = {}
        self._connections: dict[str, McpConnection] = {}
        self._events: EventLoopThread | None = None
        self._pid = os.getpid()

    def tools(self, server: str) -> list[Tool]:
        """The tools ``server`` lists (it is started if need be); ServerGoneError if it
        does not start."""
        return self._connection(server).tools

    def call(
        self,
        server: str,
        tool: str,
        args: dict[str, Any],
        restart_span: RestartSpan = nullcontext,
    ) -> CallToolResult:
        """Call ``tool`` of ``server``; if the server is gone, restart it (under
        ``restart_span``) and call once more."""
        connection = self._connection(server)
        try:
            return connection.call(tool, args)
        except ServerGoneError as exc:
            why = redact(str(exc), self._secrets)
            log.warning("MCP server %r stopped answering (%s): restarting it", server, why)
            with restart_span():
                connection = self._restart(server, connection)
        return connection.call(tool, args)

    def close(self) -> None:
        """Stop every server this process started (at exit)."""
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
            events, self._events = self._events, None
        for connection in connections:
            connection.close()
        if events is not None:
            events.stop()

    # -- connections -------------------------------------------------------------------

    def _connection(self, server: str) -> McpConnection:
        self._forget_parent()
        connection = self._connections.get(server)
        if connection is not None:
            return connection
        with self._server_lock(server):  # one start per server, whoever asks first
            connection = self._connections.get(server)
            if connection is None:
                connection = self._open(server)
            return connection

    def _restart(self, server: str, dead: McpConnection) -> McpConnection:
        with self._server_lock(server):
            current = self._connections.get(server)
            if current is not None and current is not dead:
                return current  # another thread restarted it meanwhile
            self._connections.pop(server, None)
            dead.close()
            connection = self._open(server)
            log.warning("MCP server %r restarted", server)
            return connection

    def _open(self, server: str) -> McpConnection:
        config = self.configs.get(server)
        if config is None:
            raise ServerGoneError(f"no MCP server {server!r} is declared in mcp_servers")
        connection = McpConnection(server, config, self._event_loop(), self.errlog).open()
        self._connections[server] = connection
        log.info("MCP server %r started: %d tools", server, len(connection.tools))
        return connection

    def _event_loop(self) -> EventLoopThread:
        with self._lock:
            if self._events is None:
                self._events = EventLoopThread()
                atexit.register(self.close)
            return self._events

    def _server_lock(self, server: str) -> threading.Lock:
        with self._lock:
            return self._server_locks.setdefault(server, threading.Lock())

    def _forget_parent(self) -> None:
        """In a forked child: drop what the parent started (it lives on there)."""
        if os.getpid() == self._pid:
            return
        # Not under the lock: a copy of it may be held by a thread that is not in the child.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._server_locks, self._connections, self._events = {}, {}, None
