"""The reconciler: re-queues what dead workers and lost messages left behind, and stops
runs past their run timeout.

Any number of processes may run it (every worker does by default); a lock in Redis lets
one do the work at a time. Every action is a fenced Lua transition, so even two
reconcilers at once could not record anything twice.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from dagwright.models import RunStatus
from dagwright.orchestrator.broker import Broker, dispatch
from dagwright.orchestrator.control.approvals import ApprovalBook
from dagwright.orchestrator.control.cancellation import stop_work
from dagwright.orchestrator.control.run_gates import RunGates
from dagwright.orchestrator.execution.fairness import aged_node
from dagwright.orchestrator.execution.limits import NodeLimits, publish_waiters
from dagwright.orchestrator.execution.team_tasks import (
    TeamAppFactory,
    revoke_left_team_tasks,
    wake_ended_team_tasks,
)
from dagwright.orchestrator.runstate.machine import LossBackoff, ReadyNode, ended_run_keys
from dagwright.orchestrator.runtime import Runtime
from dagwright.redis_scripts import load_script, named_reply
from dagwright.telemetry.trace_export import TraceExport
from dagwright.webhooks.sender import WebhookSender

log = logging.getLogger(__name__)

ORPHAN_GRACE_MS = 60_000  # an active-set entry with no run yet may be a run being created


@dataclass
class ReconcileReport:
    ran: bool = False
    runs: int = 0
    requeued: int = 0
    republished: int = 0
    finished: list[str] = field(default_factory=list)
    exported: int = 0  # traces sent over OTLP
    webhooks_due: int = 0  # webhook deliveries handed to the sending thread
    team_tasks_ended: int = 0  # celery_task nodes woken: their team task ended


class Reconciler:
    def __init__(
        self, runtime: Runtime, broker: Broker, team_app: TeamAppFactory | None = None
    ) -> None:
        self.runtime = runtime
        self.broker = broker
        self.team_app = team_app  # None: no team Celery app here (no celery_task nodes)
        self.token = uuid.uuid4().hex
        self.limits = NodeLimits.for_runtime(runtime)
        self.gates = RunGates(runtime, broker)
        self._tidied_keys: set[str] = set()
        self.trace_export = TraceExport.for_runtime(runtime)
        self.webhooks = WebhookSender(runtime)
        self._release_lock = load_script(
            runtime.client, "dagwright.orchestrator.execution", "reconciler_release_lock"
        )

    def run_once(self) -> ReconcileReport:
        report = ReconcileReport()
        if not self._hold_lock():
            return report
        report.ran = True
        client = self.runtime.client
        report.team_tasks_ended = self._watch_team_tasks()
        empty_queues: list[str] | None = None  # asked of the broker once per pass, if needed
        self._tidied_keys = set()  # concurrency keys whose ended runs were dropped
        for run_id in client.sscan_iter(self.runtime.keys.active_runs, count=500):
            if empty_queues is None:
                empty_queues = self._empty_queues()
            report.runs += 1
            self._reconcile_run(run_id, report, empty_queues)
        self._reject_overdue_approvals(report)
        self._trim_run_index()
        report.republished += self._wake_waiters()
        report.exported = self.trace_export.export_due()
        if report.exported:
            log.info("exported %d run trace(s) over OTLP", report.exported)
        report.webhooks_due = self.webhooks.send_due()
        return report

    def _watch_team_tasks(self) -> int:
        """celery_task nodes: wake those whose team task ended (before the runs' pass,
        which then queues them), and revoke the team tasks of stopped runs."""
        if self.team_app is None:
            return 0
        try:
            app = self.team_app()
        except Exception:  # the app cannot be imported or is unfit: its nodes say why
            log.warning("the team's Celery app is unusable", exc_info=True)
            return 0
        revoke_left_team_tasks(self.runtime, app)
        return wake_ended_team_tasks(self.runtime, app)

    def _reject_overdue_approvals(self, report: ReconcileReport) -> None:
        """Approvals nobody decided within their timeout count as rejected."""
        ready = ApprovalBook(self.runtime).reject_overdue()
        if ready:
            log.info("rejected %d approval(s) nobody decided in time", len(ready))
            report.requeued += len(ready)
            dispatch(self.broker, self.runtime.machine, ready)

    def _wake_waiters(self) -> int:
        """Concurrency limits: free the slots of dead holders (not renewed), drop stale
        waiters and publish those that fit, so a crash never leaves waiters stuck."""
        waiters = self.limits.wake(self.limits.registered())
        return publish_waiters(self.runtime, self.broker, self.limits, waiters)

    def _empty_queues(self) -> list[str]:
        """The queues live workers consume that hold no message right now."""
        queues = self.runtime.live_worker_queues()
        return sorted(queue for queue in queues if self.broker.queue_depth(queue) == 0)

    def _trim_run_index(self) -> None:
        """Drop index entries of runs past retention (their keys have expired): from the
        run index (by creation), the ended runs' sets the metrics count (by end), and the
        replayed dead letters trimmed from the DLQ stream (``keys.dlq_settled``)."""
        settings, keys = self.runtime.settings, self.runtime.keys
        now_ms = self.runtime.store.server_time_ms()
        cutoff = now_ms - settings.retention_s * 1000
        pipe = self.runtime.client.pipeline(transaction=False)
        pipe.zremrangebyscore(keys.run_index, "-inf", cutoff)
        for key in ended_run_keys(keys):
            pipe.zremrangebyscore(key, "-inf", cutoff)
        pipe.zremrangebyscore(keys.dlq_settled, "-inf", now_ms - settings.dlq_retention_s * 1000)
        pipe.execute()

    def _reconcile_run(self, run_id: str, report: ReconcileReport, empty_queues: list[str]) -> None:
        settings = self.runtime.settings
        found = self.runtime.machine.reconcile_run(
            run_id,
            publish_grace_s=settings.publish_grace_s,
            stranded_after_s=settings.stranded_after_s,
            empty_queues=empty_queues,
            priority_aging_s=settings.priority_aging_s,
            aging_limit=settings.priority_aging_per_pass,
            loss_backoff=LossBackoff(
                settings.worker_loss_backoff_s, settings.worker_loss_backoff_max_s
            ),
        )
        if found.timed_out is not None:
            log.warning("run %s ran past its run timeout (or teardown deadline): stopped", run_id)
            stop_work(self.runtime, self.broker, run_id, found.timed_out)
        if found.status not in (RunStatus.RUNNING.value, RunStatus.PLANNING.value):
            self._forget_if_over(run_id, found.status, report)
            return
        if self._age_out_if_too_old(run_id, found.age_ms, report):
            return
        if found.gated:  # waiting for its concurrency key: asked again each pass
            admission = self.gates.admit(run_id, self._tidied_keys)
            report.requeued += len(admission.ready) if admission else 0
        stranded = found.stranded
        to_publish = found.requeued + found.unpublished + stranded
        if found.requeued or found.unpublished or stranded:
            log.info(
                "run %s: re-queued %d, publishing again %d unconfirmed and %d stranded",
                run_id,
                len(found.requeued),
                len(found.unpublished),
                len(stranded),
            )
        report.requeued += len(found.requeued)
        report.republished += len(found.unpublished) + len(stranded)
        dispatch(self.broker, self.runtime.machine, to_publish)
        self._publish_aged(run_id, found.aged, report)

    def _age_out_if_too_old(self, run_id: str, age_ms: int, report: ReconcileReport) -> bool:
        """Fail a run open past ``run_max_age_s`` (its nodes at work dead-lettered, so a
        replay re-opens it); True if it did."""
        max_age_s = self.runtime.settings.run_max_age_s
        if max_age_s is None or age_ms < max_age_s * 1000:
            return False
        aged = self.runtime.machine.age_out(run_id, max_age_s)
        if aged.status != RunStatus.FAILED.value:
            return False
        log.warning(
            "run %s was open past its maximum age (%d s): failed, %d dead letter(s)",
            run_id,
            max_age_s,
            aged.dead_letters,
        )
        stop_work(self.runtime, self.broker, run_id, aged.stopped)
        self._forget_if_over(run_id, aged.status, report)
        return True

    def _publish_aged(self, run_id: str, aged: list[ReadyNode], report: ReconcileReport) -> None:
        """Publish the nodes that waited past ``priority_aging_s`` again, ahead of every
        priority; the message each leaves behind is dropped at its claim (its fence)."""
        if not aged:
            return
        log.info("run %s: %d node(s) waited past priority aging, sent ahead", run_id, len(aged))
        report.republished += len(aged)
        dispatch(self.broker, self.runtime.machine, [aged_node(node) for node in aged])

    def _forget_if_over(self, run_id: str, status: str, report: ReconcileReport) -> None:
        if status == "missing":  # no run hash: being created, or expired
            created = self.runtime.client.zscore(self.runtime.keys.run_index, run_id)
            now = self.runtime.store.server_time_ms()
            if created is not None and now - created < ORPHAN_GRACE_MS:
                return
        elif not RunStatus(status).is_final:
            return
        self.runtime.forget_active(run_id)
        report.finished.append(run_id)

    def release(self) -> bool:
        """Give the lock up (on a clean stop), so that a standby reconciler takes over at
        its next pass instead of when the lock expires; True if this one held it."""
        key = self.runtime.keys.reconciler_lock
        fields = named_reply(self._release_lock(keys=[key], args=[self.token]))
        return bool(int(fields["released"]))

    def _hold_lock(self) -> bool:
        client = self.runtime.client
        key = self.runtime.keys.reconciler_lock
        ttl_ms = int(self.runtime.settings.reconcile_interval_s * 3000)
        if client.set(key, self.token, nx=True, px=ttl_ms):
            return True
        if client.get(key) == self.token:
            client.pexpire(key, ttl_ms)
            return True
        return False
