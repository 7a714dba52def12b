"""A submitted run as an MCP task (the ``io.modelcontextprotocol/tasks`` extension,
2026-07-28 revision): for a client that declares the extension on its ``tools/call``,
``submit_run`` answers a task handle instead of the run, and the task follows the run.

==================  ===========================================================
run                 task
==================  ===========================================================
planning, running   ``working`` (statusMessage: nodes done of all)
a node waits for    ``input_required``: one elicitation (form: decision approve
approval            or reject, a note) per waiting request, its message the
                    approval's question; ``tasks/update`` answers decide them
succeeded           ``completed``, result: get_result's answer as a tool result
failed              ``completed``, a tool result with ``isError`` (the run's
                    reason): the spec keeps ``failed`` for JSON-RPC errors
cancelled           ``cancelled``; ``tasks/cancel`` cancels the run
==================  ===========================================================

The task id is the run id and the task's state is the run's, read from Redis at each
``tasks/get``: there is no task store to lose, expire apart or share between instances.
Scopes as the tools': ``tasks/get`` reads (every caller), ``tasks/update`` (a decision)
and ``tasks/cancel`` need operate. A client that does not declare the extension gets the
run from ``submit_run`` and follows it with ``follow_run`` (progress notifications).
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, CallToolRequestParams, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from dagwright.client import Client
from dagwright.client.tokens import Scope
from dagwright.errors import DagwrightError, UnknownRunError, public_line
from dagwright.json_views import iso
from dagwright.mcp_server.callers import caller_of
from dagwright.mcp_server.calls import client_call
from dagwright.models import Approval, RunState, RunStatus

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TOOL = "submit_run"
MAX_SHOWN_ARGS = 2000  # characters of an approval's arguments in its question
DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject"], "title": "Decision"},
        "note": {"type": "string", "maxLength": 2000, "title": "Note"},
    },
    "required": ["decision"],
}


class TaskParams(RequestParams):
    """``tasks/get`` and ``tasks/cancel``: which task (a run id)."""

    task_id: str


class TaskUpdateParams(TaskParams):
    """``tasks/update``: answers to the task's outstanding input requests, by key."""

    input_responses: dict[str, Any]


class RunTasks(Extension):
    """The tasks extension over ``client``: runs as tasks."""

    identifier = TASKS_EXTENSION

    def __init__(self, client: Client) -> None:
        self.client = client

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get_task),
            MethodBinding("tasks/update", TaskUpdateParams, self.update_task),
            MethodBinding("tasks/cancel", TaskParams, self.cancel_task),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """``submit_run`` of a declaring client: the run's task, once the run exists."""
        result = await call_next(ctx)
        if params.name != TASK_TOOL or not declares_tasks(ctx):
            return result
        run = getattr(result, "structured_content", None)
        if getattr(result, "is_error", True) or not isinstance(run, dict):
            return result
        return {"resultType": "task", **await self.task(run["run_id"])}

    async def get_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> Any:
        require_client_extension(ctx, TASKS_EXTENSION)
        return await self.task(params.task_id)

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: TaskUpdateParams
    ) -> dict[str, Any]:
        """Decide the waiting approvals answered; keys not outstanding are ignored."""
        require_client_extension(ctx, TASKS_EXTENSION)
        by = operator(ctx)
        waiting = await self.waiting(params.task_id)
        for key, answer in params.input_responses.items():
            approval = waiting.get(key)
            if approval is not None and isinstance(answer, dict):
                await self.decide(approval, answer, by)
        return {}

    async def cancel_task(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> Any:
        require_client_extension(ctx, TASKS_EXTENSION)
        operator(ctx)
        await self.read(self.client.cancel, params.task_id, "cancelled by an MCP client (task)")
        return {}

    async def task(self, run_id: str) -> dict[str, Any]:
        """The task of run ``run_id`` as it is now (a DetailedTask)."""
        state: RunState = await self.read(self.client.status, run_id)
        approvals = await self.waiting(run_id) if not state.status.is_final else {}
        return task_json(state, approvals, self.client.settings.mcp.task_poll_ms)

    async def waiting(self, run_id: str) -> dict[str, Approval]:
        """The run's requests waiting for a decision, by their input request key."""
        found: list[Approval] = await self.read(self.client.approvals.list, run_id)
        return {input_key(approval): approval for approval in found if approval.decision is None}

    async def decide(self, approval: Approval, answer: dict[str, Any], by: str) -> None:
        """Approve or reject ``approval`` as an elicitation's ``answer`` says (``cancel``:
        no decision, it keeps waiting)."""
        action = answer.get("action")
        if action not in ("accept", "decline"):
            return
        content = answer.get("content")
        content = content if isinstance(content, dict) else {}
        approved = action == "accept" and content.get("decision") == "approve"
        note = str(content.get("note", ""))[:2000]
        decide = self.client.approvals.approve if approved else self.client.approvals.reject
        try:
            await client_call(decide, approval.run_id, approval.node, comment=note, by=by)
        except ToolError:  # decided meanwhile (another client, its deadline): not outstanding
            return

    async def read(self, call: Any, *args: Any) -> Any:
        """A client call in a worker thread, its errors as the JSON-RPC errors the
        extension names (an unknown task: invalid params), with the CLI's line."""
        try:
            return await anyio.to_thread.run_sync(functools.partial(call, *args))
        except UnknownRunError as exc:
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: {public_line(exc)}") from None
        except DagwrightError as exc:
            raise MCPError(INVALID_REQUEST, public_line(exc)) from None


def declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared the extension on this request, at a protocol version that can
    carry a task handle (2026-07-28 on)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities else None
    return bool(extensions) and TASKS_EXTENSION in (extensions or {})


def operator(ctx: ServerRequestContext[Any, Any]) -> str:
    """The caller's name, if they hold the operate scope (a JSON-RPC error if not)."""
    caller = caller_of(ctx.request)
    if not caller.scope.allows(Scope.OPERATE):
        line = f"this needs the operate scope; your token has {caller.scope.value}"
        raise MCPError(INVALID_REQUEST, line)
    return caller.name


def input_key(approval: Approval) -> str:
    """The input request key of a waiting approval: unique over the task's lifetime (an
    approval request's id is never reused)."""
    return f"approval-{approval.id}"


def task_json(state: RunState, approvals: dict[str, Approval], poll_ms: int) -> dict[str, Any]:
    """The DetailedTask of a run: its status and that status's own field."""
    task: dict[str, Any] = {
        "taskId": state.run_id,
        "createdAt": iso(state.created_at) or now_iso(),
        "lastUpdatedAt": iso(state.finished_at) or now_iso(),
        "ttlMs": None,
        "pollIntervalMs": poll_ms,
    }
    if state.status == RunStatus.SUCCEEDED:
        answer = {"run_id": state.run_id, "result": state.result}
        line = f"run {state.run_id} succeeded"
        result = tool_result(answer, error=False)
        return {**task, "status": "completed", "statusMessage": line, "result": result}
    if state.status == RunStatus.FAILED:
        line = f"run {state.run_id} failed: {state.reason or 'see get_run'}"
        return {**task, "status": "completed", "statusMessage": line, "result": failed(line)}
    if state.status == RunStatus.CANCELLED:
        return {**task, "status": "cancelled", "statusMessage": state.reason or "cancelled"}
    if approvals:
        requests = {key: elicitation(approval) for key, approval in approvals.items()}
        message = f"{len(approvals)} request(s) wait for your approval"
        return {
            **task,
            "status": "input_required",
            "statusMessage": message,
            "inputRequests": requests,
        }
    done = f"{state.status.value}: {state.counts.done} of {state.counts.total} nodes done"
    return {**task, "status": "working", "statusMessage": done}


def elicitation(approval: Approval) -> dict[str, Any]:
    """The form a person answers to decide ``approval``."""
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": question(approval),
            "requestedSchema": DECISION_SCHEMA,
        },
    }


def question(approval: Approval) -> str:
    """The approval's question: what would run, with which arguments, until when."""
    shown = json.dumps(approval.args, ensure_ascii=False)
    if len(shown) > MAX_SHOWN_ARGS:
        shown = shown[:MAX_SHOWN_ARGS] + "…"
    if approval.kind == "tool":
        what = f"the tool call {approval.action!r} of node {approval.node!r}"
    else:
        what = f"node {approval.node!r} (a {approval.action} node)"
    return (
        f"Run {approval.run_id}: approve {what} with arguments {shown}? "
        f"It waits until {iso(approval.deadline)}."
    )


def tool_result(answer: dict[str, Any], *, error: bool) -> dict[str, Any]:
    text = json.dumps(answer, ensure_ascii=False)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": answer,
        "isError": error,
    }


def failed(line: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": line}], "isError": True}


def now_iso() -> str:
    return datetime.now(UTC).isoformat()
