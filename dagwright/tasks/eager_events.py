"""Task events for the nodes a worker ran eagerly, so that Flower still lists every node.

A node run eagerly (``orchestrator/execution/eager.py``) has no message, so Celery sends
no event for it. This sends the events its own task would have had (sent, received,
started, succeeded, under the task id its message would have carried: ``run.node.fence``)
in one batch once the message that ran them is done: one round trip per message, however
many nodes it ran.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Celery
from celery.signals import worker_init

from dagwright.app import DagwrightCelery
from dagwright.keys import node_task_id
from dagwright.orchestrator.execution.eager import EagerRun
from dagwright.tasks.publish import readable_as

log = logging.getLogger(__name__)

TASK_GROUP = "task"
EVENTS_PER_NODE = 4  # sent, received, started, succeeded


@worker_init.connect
def remember_worker_name(sender: Any, **_: Any) -> None:
    """Record the worker's node name on its app: a task's ``request.hostname`` is that name
    in the prefork pool but the bare host name in the threads and solo pools, and Flower
    must see the events of eager nodes come from the worker that ran them."""
    if isinstance(sender.app, DagwrightCelery):
        sender.app.worker_name = sender.hostname


def announce_eager_runs(app: Celery, hostname: str, runs: list[EagerRun]) -> None:
    """Send Flower the task events of ``runs``, as the worker ``hostname`` (best effort: a
    lost event costs a row in Flower, never a node)."""
    if not runs or not app.conf.worker_send_task_events:
        return
    try:
        with app.producer_or_acquire() as producer:
            dispatcher = app.events.Dispatcher(
                producer.connection,
                hostname=hostname,
                channel=producer.channel,
                buffer_group={TASK_GROUP},
                buffer_limit=EVENTS_PER_NODE * len(runs) + 1,  # flushed below, all at once
                buffer_while_offline=False,
            )
            for run in runs:
                send_events_of(dispatcher, run)
            dispatcher.flush()
    except Exception:
        log.warning("sending the task events of %d eager node(s) failed", len(runs), exc_info=True)


def send_events_of(dispatcher: object, run: EagerRun) -> None:
    node = run.node
    task_id = node_task_id(node.run_id, node.node_id, node.fence)
    shown = readable_as(node)
    send = dispatcher.send  # type: ignore[attr-defined]
    # task-sent too: Flower reads a task's queue from it, as for a published node
    send(
        "task-sent",
        uuid=task_id,
        name=node.dispatch.task,
        args=shown["argsrepr"],
        kwargs=shown["kwargsrepr"],
        retries=0,
        eta=None,
        expires=None,
        queue=node.dispatch.queue,
        exchange="",
        routing_key=node.dispatch.queue,
        root_id=task_id,
        parent_id=None,
        timestamp=run.started_at,
    )
    send(
        "task-received",
        uuid=task_id,
        name=node.dispatch.task,
        args=shown["argsrepr"],
        kwargs=shown["kwargsrepr"],
        root_id=task_id,
        parent_id=None,
        retries=0,
        eta=None,
        expires=None,
        timestamp=run.started_at,
    )
    send("task-started", uuid=task_id, timestamp=run.started_at)
    send(
        "task-succeeded",
        uuid=task_id,
        result=repr(run.outcome),
        runtime=run.runtime_s,
        timestamp=run.started_at + run.runtime_s,
    )
