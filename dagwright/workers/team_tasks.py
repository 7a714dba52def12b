"""The ``celery_task`` worker type: a task of the team's own Celery app, sent by name to
the team's own workers, whose result becomes the node's output.

``dagwright.function(task)`` imports a task's body and runs it inside dagwright's
worker: the team's routing, rate and time limits, retries and base-class hooks do not
apply there. A ``celery_task`` node instead *sends* the task through the team's app
(``DAGWRIGHT_CELERY_APP``), so all of that applies, on the team's workers, and waits
for it without holding a dagwright worker slot: a claim sends or looks, then the node is
parked (RETRY_WAIT, ``NodeWait`` "waiting for Celery task …") until the reconciler sees
its result in the team's result backend, or ``celery_task_poll_s`` at the latest.

What a claim does is decided by the node's checkpoint (``SentTask``), so a worker killed
at any point leaves nothing sent twice but in one case (below):

- nothing sent yet, or the last task settled (it failed: this is a retry): the task id
  (``keys.team_task_id``, from this claim's fence) is checkpointed, fenced, then the
  task sent, then the send confirmed in the checkpoint;
- sent but not confirmed (the worker died around the send): sent again under the same
  id. Only if it died after the broker took the message and before the confirmation
  does the team's worker get it twice (one result, recorded once);
- sent: its outcome is read. A success is the output; a failure (after the task's own
  retries) is ``TeamTaskFailedError`` under the team's exception class name, the task
  settled first; past the node's ``timeout_s`` from the send, the task is revoked and
  the node times out (``NodeTimeoutError``); else the node parks again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

from dagwright.errors import NodeTimeoutError, TeamTaskFailedError, TeamTaskPendingError
from dagwright.keys import team_task_id
from dagwright.models import Node, RetryPolicy
from dagwright.settings import Settings
from dagwright.workers.context import NodeContext
from dagwright.workers.registry import WorkerType

CELERY_TASK_TYPE = "celery_task"
# The team's task retries itself (autoretry_for, self.retry()); a second layer here would
# multiply them. A plan's `retry:` sends it again after a failure, if asked.
CELERY_TASK_RETRY = RetryPolicy(max_attempts=1)
# Celery's states that end a task (celery.states.READY_STATES, without importing Celery).
SUCCESS, FAILURE, REVOKED = "SUCCESS", "FAILURE", "REVOKED"
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
CHECKPOINT_KEY = "team_task"
NOT_FOR_CELERY_TASKS = ("function", "code", "instruction")


@dataclass(frozen=True)
class TaskOutcome:
    """A team task as its result backend tells it: Celery's ``state``, and its result
    (``SUCCESS``) or its exception's class name and message (``FAILURE``, ``REVOKED``)."""

    state: str
    result: Any = None
    error_class: str = ""
    message: str = ""

    @property
    def ready(self) -> bool:
        return self.state in READY_STATES

    def output(self) -> Any:
        """The task's result; ``TeamTaskFailedError`` if it did not succeed."""
        if self.state == SUCCESS:
            return self.result
        error_class = self.error_class or ("TaskRevokedError" if self.state == REVOKED else "")
        raise TeamTaskFailedError(error_class or "TeamTaskFailed", self.message or self.state)


class TeamApp(Protocol):
    """The team's Celery app, as dagwright uses it (``dagwright/tasks/team_app.py``)."""

    def send(self, name: str, kwargs: dict[str, Any], task_id: str) -> None:
        """Send task ``name`` under ``task_id`` through the team's routing."""
        ...

    def outcomes(self, task_ids: list[str]) -> dict[str, TaskOutcome]:
        """The outcome of each task, read from the result backend in few round trips."""
        ...

    def revoke(self, task_ids: list[str]) -> None:
        """Revoke the tasks through the team's app control (terminating running ones)."""
        ...


class TeamTasks(Protocol):
    """The team tasks of one node: the app, plus the run's record of what is in flight
    (what a stop revokes and the reconciler watches)."""

    def send(self, name: str, kwargs: dict[str, Any], task_id: str) -> None: ...

    def outcome(self, task_id: str) -> TaskOutcome: ...

    def revoke(self, task_id: str) -> None: ...

    def settle(self, task_id: str) -> None:
        """The task is no longer in flight for the run."""
        ...


@dataclass(frozen=True)
class SentTask:
    """What the node's checkpoint says of its team task."""

    task_id: str
    sent_at: float  # epoch s of the first send: the node's timeout_s counts from it
    confirmed: bool = False  # the broker took the message
    settled: bool = False  # it failed or timed out: a retry sends a new one

    @classmethod
    def from_checkpoint(cls, checkpoint: Any) -> SentTask | None:
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get(CHECKPOINT_KEY), dict):
            return None
        fields = checkpoint[CHECKPOINT_KEY]
        return cls(
            task_id=str(fields["task_id"]),
            sent_at=float(fields["sent_at"]),
            confirmed=bool(fields.get("confirmed")),
            settled=bool(fields.get("settled")),
        )

    def as_checkpoint(self) -> dict[str, Any]:
        fields = {"task_id": self.task_id, "sent_at": self.sent_at}
        return {CHECKPOINT_KEY: {**fields, "confirmed": self.confirmed, "settled": self.settled}}


def run_celery_task(ctx: NodeContext, node: Node) -> Any:
    """Send the node's task, or look at the one sent (see the module docstring)."""
    tasks = ctx.team_tasks()
    sent = SentTask.from_checkpoint(ctx.last_checkpoint)
    if sent is None or sent.settled:
        sent = SentTask(team_task_id(ctx.run_id, ctx.node_id, ctx.fence), time.time())
        ctx.checkpoint(sent.as_checkpoint())
    if not sent.confirmed:
        tasks.send(node.task or "", task_kwargs(ctx, node), sent.task_id)
        sent = replace(sent, confirmed=True)
        ctx.checkpoint(sent.as_checkpoint())
    return await_outcome(ctx, node, tasks, sent)


def await_outcome(ctx: NodeContext, node: Node, tasks: TeamTasks, sent: SentTask) -> Any:
    """The task's result if it is in; else the node parks (or times out, revoking it)."""
    outcome = tasks.outcome(sent.task_id)
    if outcome.ready:
        if outcome.state != SUCCESS:
            settle(ctx, tasks, sent)
        else:  # recorded by the completion; a redelivery reads the same result
            tasks.settle(sent.task_id)
        return outcome.output()
    timeout_s = node.timeout_s or ctx.settings.limits.default_timeout_s
    left_s = sent.sent_at + timeout_s - time.time()
    if left_s <= 0:
        give_up(ctx, tasks, sent)
        raise NodeTimeoutError(
            f"Celery task {sent.task_id} ({node.task}) had no result within the node's "
            f"timeout_s of {timeout_s:g}s: revoked"
        )
    raise TeamTaskPendingError(sent.task_id, min(ctx.settings.celery.task_poll_s, left_s))


def give_up(ctx: NodeContext, tasks: TeamTasks, sent: SentTask) -> None:
    """Revoke the task and settle it: it ran out of the node's time."""
    tasks.revoke(sent.task_id)
    settle(ctx, tasks, sent)


def give_up_waiting(ctx: NodeContext) -> None:
    """``give_up`` on the task the node's checkpoint names, if any (the node waited longer
    than retry.lua allows: a backstop of the node's own timeout)."""
    sent = SentTask.from_checkpoint(ctx.last_checkpoint)
    if sent is not None:
        give_up(ctx, ctx.team_tasks(), sent)


def settle(ctx: NodeContext, tasks: TeamTasks, sent: SentTask) -> None:
    """The task failed or was given up: the next attempt, if any, sends a new one."""
    ctx.checkpoint(replace(sent, settled=True).as_checkpoint())
    tasks.settle(sent.task_id)


def task_kwargs(ctx: NodeContext, node: Node) -> dict[str, Any]:
    """The task's keyword arguments: the node's ``params`` (templated like any node's),
    and its dependencies' outputs as ``inputs`` (by node id) when it has any."""
    if not node.depends_on:
        return dict(node.params)
    return {**node.params, "inputs": ctx.inputs}


def celery_task_worker_type(settings: Settings) -> WorkerType:
    """The ``celery_task`` type, refusing its nodes where no team app is configured."""

    def check_node(node: Node) -> list[str]:
        problems = [
            f"`{name}:` is not for a celery_task node (it sends `task:` to your workers)"
            for name in NOT_FOR_CELERY_TASKS
            if getattr(node, name) is not None
        ]
        if not node.task:
            problems.append("a celery_task node needs `task: <name>` (a task of your Celery app)")
        if settings.celery.app is None:
            problems.append(
                "a celery_task node needs your team's Celery app: set DAGWRIGHT_CELERY_APP="
                "module:app (or celery_app in dagwright.toml)"
            )
        return problems

    return WorkerType(
        name=CELERY_TASK_TYPE,
        kind="celery_task",
        description="Sends `task` (by name) through your own Celery app to your own workers, "
        "with `params` as keyword arguments; its result is the output.",
        run=run_celery_task,
        check_node=check_node,
        default_retry=CELERY_TASK_RETRY,
    )
