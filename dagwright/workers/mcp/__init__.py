"""MCP servers' tools for agent types, with the official ``mcp`` SDK.

- ``attach.py``: which types get which servers (settings ``agent_mcp``,
  ``AgentSpec.mcp_servers``), when the registry is built; the policy stays deny-by-default;
- ``pool.py``: the servers of one worker process, started on first use, restarted when
  they die;
- ``connection.py``: one server's session, held by a task of the process's event loop;
- ``tools.py``: a server's tool as a ``Tool`` (policy, audit, breaker, redaction,
  truncation as for built-ins); ``names.py``: its name, ``mcp__<server>__<tool>``;
- ``probe.py``: whether each server answers and what it offers (``worker-types``,
  ``doctor``).

Only this package imports ``mcp`` (an import-linter contract), and only once a type has a
server.
"""
