"""A client side of the MCP tasks extension (``io.modelcontextprotocol/tasks``), built on
the ``mcp`` SDK's own extension surface (``ClientExtension`` + ``ResultClaim``), as a
client application would write it: the SDK 2.3 ships no tasks client.

``TaskFollower`` declares the extension, so a task-capable ``tools/call`` may answer a
task handle; its claim then polls ``tasks/get`` at the server's ``pollIntervalMs``,
answers ``input_required`` requests with ``answer`` through ``tasks/update``, may cancel
with ``tasks/cancel``, and finishes with the task's tool result. Every status seen is
kept in ``statuses``, every input request in ``asked``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, EmptyResult, Request, RequestParams, Result, TextContent
from pydantic import ConfigDict

from tests.support.mcp_sessions import transcribe

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(Result):
    """A task handle (``resultType: task``)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class DetailedTask(Result):
    """What ``tasks/get`` answers: a task with its status's own field."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    input_requests: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


class TaskIdParams(RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    name_param: ClassVar[str | None] = "taskId"  # the Mcp-Name routing header


class UpdateTask(Request[TaskUpdateParams, Literal["tasks/update"]]):
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    name_param: ClassVar[str | None] = "taskId"


Answer = Callable[[str, dict[str, Any]], dict[str, Any]]


def approve_all(key: str, request: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"decision": "approve", "note": "looks right"}}


@dataclass
class TaskFollower(ClientExtension):
    answer: Answer = approve_all
    cancel_when_working: bool = False
    timeout_s: float = 60.0
    statuses: list[str] = field(default_factory=list)
    asked: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_ids: list[str] = field(default_factory=list)

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.follow)]

    async def follow(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        """Poll the task to its end; its tool result (or an error result if cancelled)."""
        self.task_ids.append(created.task_id)
        transcribe(f"  ← task {created.task_id} ({created.status})")
        self.statuses.append(created.status)
        deadline = time.monotonic() + self.timeout_s
        params = TaskIdParams(task_id=created.task_id)
        while time.monotonic() < deadline:
            task = await ctx.session.send_request(
                GetTask(method="tasks/get", params=params), DetailedTask
            )
            self.statuses.append(task.status)
            transcribe(f"  tasks/get {created.task_id} ← {task.status}: {task.status_message}")
            if task.status == "completed":
                return CallToolResult.model_validate(task.result)
            if task.status in ("cancelled", "failed"):
                text = task.status_message or task.status
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
            await self.act(task, ctx)
            await anyio.sleep((task.poll_interval_ms or 500) / 1000)
        raise AssertionError(f"task {created.task_id} did not end in {self.timeout_s}s")

    async def act(self, task: DetailedTask, ctx: ClaimContext) -> None:
        """Answer new input requests; cancel once, if asked to."""
        if task.status == "working" and self.cancel_when_working:
            self.cancel_when_working = False
            cancel = CancelTask(method="tasks/cancel", params=TaskIdParams(task_id=task.task_id))
            transcribe(f"  tasks/cancel {task.task_id}")
            await ctx.session.send_request(cancel, EmptyResult)
        new = {k: v for k, v in (task.input_requests or {}).items() if k not in self.asked}
        if task.status != "input_required" or not new:
            return
        self.asked.update(new)
        for key, request in new.items():
            transcribe(f"  input request {key}: {request['params'].get('message')}")
        answers = {key: self.answer(key, request) for key, request in new.items()}
        transcribe(f"  tasks/update {task.task_id} → {json.dumps(answers)}")
        update = TaskUpdateParams(task_id=task.task_id, input_responses=answers)
        await ctx.session.send_request(
            UpdateTask(method="tasks/update", params=update), EmptyResult
        )
