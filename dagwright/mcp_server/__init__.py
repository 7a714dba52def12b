"""dagwright as an MCP server: a person in Claude Desktop, Claude Code or any MCP client
submits a plan or a goal, follows the run, decides what waits for approval and reads the
result (``dagwright mcp`` over stdio; ``/mcp`` of ``dagwright server`` over streamable
HTTP, behind the API's tokens and scopes).

Rooms: ``building`` (the server), ``run_tools`` and ``operation_tools`` (the tools, thin
over the ``Client``, answering ``json_views``' shapes), ``callers`` (who asks, and
scopes), ``calls`` (client calls off the event loop, errors as tool errors),
``plan_files`` (which files a client may name), ``http`` (the authenticated endpoint).

Not ``workers/mcp``: that package is the other direction, agents using MCP servers'
tools as a *client*.
"""
