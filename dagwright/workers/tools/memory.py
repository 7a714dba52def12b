"""The memory tool: the Messages API's ``memory_20250818``, stored by dagwright.

The API defines the tool (its description and input schema are the API's; the request
carries only ``{"type": "memory_20250818", "name": "memory"}``), the model sends file
commands under ``/memories`` as ``tool_use`` blocks, and this tool runs them on the
node's namespace (``ctx.memory()``: ``memory/store.py``). A type is offered it by
``settings.memory.agent_memory`` (``workers/memory_attach.py``) or by naming ``memory`` in its
tools; the policy decides each command like any call (``when: {command: "view"}``).
What earlier runs wrote is data, not instructions: its results reach the model delimited
as untrusted content.
"""

from __future__ import annotations

from typing import Literal

from dagwright.errors import ToolError
from dagwright.memory.commands import MemoryCommand
from dagwright.memory.store import CallRef
from dagwright.redaction import known_secrets, redact
from dagwright.workers.context import NodeContext

MEMORY_TOOL = "memory"
MEMORY_TOOL_TYPE = "memory_20250818"
MEMORY_TOOL_DEFINITION = {"type": MEMORY_TOOL_TYPE, "name": MEMORY_TOOL}
MEMORY_SPAN = "memory.command"
RESULT_SUMMARY_CHARS = 200


def memory(
    ctx: NodeContext,
    command: Literal["view", "create", "str_replace", "insert", "delete", "rename"],
    path: str | None = None,
    view_range: list[int] | None = None,
    file_text: str | None = None,
    old_str: str | None = None,
    new_str: str | None = None,
    insert_line: int | None = None,
    insert_text: str | None = None,
    old_path: str | None = None,
    new_path: str | None = None,
) -> str:
    """Your memory: files under /memories that outlast this task (view, create,
    str_replace, insert, delete, rename)."""
    call = ctx.tool_call
    if call is None:
        raise ToolError("the memory tool answers an agent's tool call only")
    parsed = MemoryCommand(
        command=command,
        path=path,
        view_range=view_range,
        file_text=file_text,
        old_str=old_str,
        new_str=new_str,
        insert_line=insert_line,
        insert_text=insert_text,
        old_path=old_path,
        new_path=new_path,
    )
    node_memory = ctx.memory()
    ref = CallRef(ctx.run_id, ctx.node_id, ctx.fence, call.tool_use_id)
    secrets = known_secrets(ctx.settings)
    with ctx.span(
        MEMORY_SPAN,
        namespace=node_memory.namespace,
        command=command,
        path=redact(" ".join(parsed.paths()), secrets)[:500],
        writes=parsed.writes,
        tool_use_id=call.tool_use_id,
    ) as span:
        result = node_memory.run(parsed, ref)
        span.attributes["result"] = result_summary(result, secrets)
        return result


def result_summary(result: str, secrets: tuple[str, ...]) -> str:
    """The result's first line, secrets masked, at most ``RESULT_SUMMARY_CHARS``: what the
    trace (and the dashboard's memory view) shows of a command's answer; the whole answer
    is in the node's transcript."""
    first_line = redact(result, secrets).partition("\n")[0]
    if len(first_line) <= RESULT_SUMMARY_CHARS:
        return first_line
    return first_line[: RESULT_SUMMARY_CHARS - 1] + "\u2026"
